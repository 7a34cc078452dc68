"""Daily partitions by the UTC date of logged_at, from the first partition day: CITEGATE_FIRST_DAY, else the first
day with data, so the UI lists the days there are, not a year of empty ones."""

from __future__ import annotations

import os
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
import duckdb

from citegate_assets.lib.core.paths import resolve as resolve_settings
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.ingest.records import EARLIEST_DAY
from citegate_assets.lib.storage.warehouse import connect, query

FIRST_DAY_ENV = "CITEGATE_FIRST_DAY"


def first_partition_day(env: dict | None = None, today: date | None = None, first_data_day: date | None = None) -> date:
    """The first daily partition: CITEGATE_FIRST_DAY (YYYY-MM-DD, not before EARLIEST_DAY), else the first day with
    data (first_data_day: the published copy's first ingested day), else January 1 of the previous UTC year. Records
    older than it are still ingested (EARLIEST_DAY bounds ingestion); they are gated only once CITEGATE_FIRST_DAY
    reaches back to them, in the CLI and in `dagster dev` alike."""
    raw = (os.environ if env is None else env).get(FIRST_DAY_ENV, "").strip()
    if not raw:
        if first_data_day is not None:
            return max(first_data_day, EARLIEST_DAY)
        today = today or utc_now().date()
        return date(today.year - 1, 1, 1)
    try:
        day = date.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"{FIRST_DAY_ENV}={raw!r} is not a date (YYYY-MM-DD)") from None
    if day < EARLIEST_DAY:
        raise ValueError(f"{FIRST_DAY_ENV}={raw} is before {EARLIEST_DAY}, the earliest day a record may have")
    return day


def first_day_with_data(published: Path) -> date | None:
    """The first day the published copy holds records of; None without a copy or a readable one (the definitions
    load without a warehouse)."""
    if not published.is_file():
        return None
    try:
        with connect(published, read_only=True) as con:
            [(day,)] = query(con, "report/first_day").fetchall()
    except (duckdb.Error, OSError):
        return None
    return day if isinstance(day, date) else None


def _first_day_here() -> date | None:
    """The first day with data of the warehouse this process's settings name (flags aside: the environment, the
    config file, the defaults): what `dagster dev` and the daemon run on. The CLI sets CITEGATE_FIRST_DAY itself."""
    if os.environ.get(FIRST_DAY_ENV, "").strip():
        return None
    try:
        return first_day_with_data(resolve_settings().published)
    except ValueError:  # a broken config file: reported by what reads it, not here
        return None


FIRST_DAY = first_partition_day(first_data_day=_first_day_here())
daily_partitions = dg.DailyPartitionsDefinition(start_date=FIRST_DAY.isoformat(), timezone="UTC")


def before_first_day(start: date, end: date) -> str | None:
    """Why days [start, end] (inclusive) cannot be one run, or None. Dagster would run the assets of a
    range that starts before the definition's first partition and only then fail on an invariant, so
    such a range is refused before anything runs."""
    if start >= FIRST_DAY:
        return None
    days = f"{start}" if start == end else f"{start} .. {end}"
    return (
        f"{days} {'is' if start == end else 'starts'} before the first daily partition {FIRST_DAY}: set "
        f"{FIRST_DAY_ENV}={start} (for `citegate run` and for `dagster dev` alike) to gate older days; "
        f"their records are ingested by any run in the meantime"
    )


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


def run_days(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext) -> list[date]:
    """The days the run materialized, from its partition tags (a single-run range or one partition); none
    for an unpartitioned run (then only what changed is recomputed and written)."""
    tags = context.run.tags
    start = tags.get("dagster/asset_partition_range_start") or tags.get("dagster/partition")
    end = tags.get("dagster/asset_partition_range_end") or start
    if not start or not end:
        return []
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
