"""The nightly job and its schedule: at 02:00 UTC, the previous day's partition of every asset."""

from __future__ import annotations

import dagster as dg

nightly_job = dg.define_asset_job(
    "nightly_job",
    selection=dg.AssetSelection.all().materializable(),
    description="Ingest the day's prompt log and run the gates on it.",
)

nightly_schedule = dg.build_schedule_from_partitioned_job(
    nightly_job,
    name="nightly_schedule",
    hour_of_day=2,
    minute_of_hour=0,
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
