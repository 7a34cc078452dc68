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


def row_count_metadata(start: date, end: date, total: int, by_day: dict | None = None) -> dict:
    """dagster/row_count is per partition: exact for a one-day run; a range run reports rows by day instead."""
    if end - start <= timedelta(days=1):
        return {"dagster/row_count": total}
    meta: dict = {"rows_in_run_range": total, "run_range": f"{start} .. {end - timedelta(days=1)}"}
    if by_day:
        lines = ["| day | rows |", "|---|---|"] + [f"| {d} | {n} |" for d, n in sorted(by_day.items())]
        meta["rows_by_day"] = dg.MetadataValue.md("\n".join(lines))
    return meta
