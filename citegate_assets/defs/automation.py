"""The nightly job and its schedule: at 02:00 UTC, the previous day's partition of every asset, reaching back to
the earliest day whose batch verdicts are still pending ([judge] batch_pending_days) as one single-run range."""

from __future__ import annotations

import logging
from datetime import date, timedelta, timezone

import dagster as dg

from citegate_assets.defs.partitions import FIRST_DAY
from citegate_assets.lib.config import load_config
from citegate_assets.lib.core.paths import resolve
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.storage.warehouse import connect, query
from citegate_assets.lib.support.judge.batch_state import PENDING_PREFIX

PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"

nightly_job = dg.define_asset_job(
    "nightly_job",
    selection=dg.AssetSelection.all().materializable(),
    description="Ingest the day's prompt log and run the gates on it.",
)


def earliest_pending_day(published: str, yesterday: date, days_back: int) -> date | None:
    """The earliest day in [yesterday - days_back, yesterday) with a "batch pending" verdict in the published
    copy (a cheap read that never waits on the working file's writer); None when there is none."""
    floor = max(yesterday - timedelta(days=days_back), FIRST_DAY)
    if days_back <= 0 or floor >= yesterday:
        return None
    with connect(published, read_only=True) as con:
        params = {"floor": floor, "yesterday": yesterday, "prefix": PENDING_PREFIX}
        [(day,)] = query(con, "support/batch_pending_earliest", params).fetchall()
    return day


def nightly_start(yesterday: date, log: logging.Logger | None = None) -> date:
    """The first day of the nightly run: yesterday, or an earlier day whose batch verdicts are still pending.
    Anything that stops the look (a bad config, an unreadable published copy) is logged, and yesterday is run."""
    try:
        settings = resolve()
        days_back = load_config(settings.config).judge.batch_pending_days
        if not settings.published.exists():  # the first night: nothing published, nothing pending
            return yesterday
        return earliest_pending_day(str(settings.published), yesterday, days_back) or yesterday
    except Exception as exc:  # the run itself reports a bad config; the schedule still asks for yesterday
        if log is not None:
            log.warning(f"nightly: not looking for days with pending batch verdicts ({type(exc).__name__}: {exc})")
        return yesterday


@dg.schedule(
    job=nightly_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    name="nightly_schedule",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Yesterday's partition; from the earliest day with pending batch verdicts when there is one.",
)
def nightly_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    at = context.scheduled_execution_time or utc_now()
    yesterday = at.astimezone(timezone.utc).date() - timedelta(days=1)
    start = nightly_start(yesterday, context.log)
    if start == yesterday:
        # the partition tag too, as job.run_request_for_partition sets it: the request is resolved as it is
        key = yesterday.isoformat()
        return dg.RunRequest(run_key=key, partition_key=key, tags={PARTITION_TAG: key})
    context.log.info(f"nightly: batch verdicts of {start} are pending; running {start} .. {yesterday} as one run")
    return dg.RunRequest(
        run_key=f"{start}..{yesterday}",
        tags={RANGE_START_TAG: start.isoformat(), RANGE_END_TAG: yesterday.isoformat()},
    )
