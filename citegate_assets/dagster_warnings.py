"""Silence Dagster's beta and preview warnings in citegate's own processes (the CLI and its day processes)."""

from __future__ import annotations


def hide_dagster_warnings() -> None:
    """The project's assets use Dagster parameters marked beta or preview (`backfill_policy`): Dagster
    warns about each at import, on every run, about Dagster's API and not about the user's data. Silenced for
    this process only (pyproject's pytest filterwarnings does the same for the tests); `dagster dev` and the
    daemon keep them. Call it before anything imports the definitions; it imports dagster, so readers never call it."""
    import warnings

    import dagster as dg

    for category in (dg.BetaWarning, dg.PreviewWarning):
        warnings.filterwarnings("ignore", category=category)
