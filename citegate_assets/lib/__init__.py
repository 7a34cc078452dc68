"""Pure logic of citegate: no dagster imports here, so these modules test in milliseconds."""
