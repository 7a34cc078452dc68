"""Dagster definitions, loaded as a folder by definitions.py: one module per pipeline stage (assets and their
checks side by side), the resources, the automation. A module's assets, checks, jobs and schedules are found
at module level; nothing lists them."""
