"""Dagster definitions, one module per pipeline stage (assets and their checks side by side)."""
