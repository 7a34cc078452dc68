"""The review web page behind `citegate serve` (issue 17): Starlette + Jinja2, no dagster import."""
