"""Daily partitions by the UTC date of logged_at."""

from __future__ import annotations

from datetime import date, timedelta

import dagster as dg

from citegate_assets.lib.records import EARLIEST_DAY

daily_partitions = dg.DailyPartitionsDefinition(start_date=EARLIEST_DAY.isoformat(), timezone="UTC")


def partition_days(context: dg.AssetExecutionContext) -> tuple[date, date]:
    """[start, end) of the run's partition range; one run may cover many days (single-run backfills)."""
    window = context.partition_time_window
    start = window.start.date()
    end = window.end.date()
    return start, max(end, start + timedelta(days=1))
