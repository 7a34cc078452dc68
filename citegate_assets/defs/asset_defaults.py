"""Settings the stages' assets share, defined once: the pools, and what every daily asset has."""

from __future__ import annotations

from typing import TypedDict

import dagster as dg

from citegate_assets.defs.partitions import daily_partitions, partition_days
from citegate_assets.defs.resources import is_day_run
from citegate_assets.lib.support.judging import SideBySide

# every unpartitioned asset that opens the warehouse runs in this pool; dagster_home/dagster.yaml gives pools
# one slot. Daily assets are in no such pool: day runs go side by side and take turns at the DuckDB file
# (lib/core/runlock.py, the open lock), so one day's judge runs while another day's step writes.
DUCKDB_POOL = "citegate_duckdb"
# the steps that call the judge: `citegate run --workers N` sets its limit to N, and each such step keeps
# [judge] concurrency / limit calls in flight, so N day runs never exceed [judge] concurrency together
JUDGE_POOL = "citegate_judge"


class DailyAssetSettings(TypedDict):
    partitions_def: dg.PartitionsDefinition
    backfill_policy: dg.BackfillPolicy


# a daily asset: partitioned by the UTC day; a backfill launched from the UI is one run per day (runs side by
# side), while `citegate run` and the schedule may still run a range of days as one run
DAILY = DailyAssetSettings(
    partitions_def=daily_partitions,
    backfill_policy=dg.BackfillPolicy.multi_run(1),
)


def judge_slots(context: dg.AssetExecutionContext) -> int:
    """How many judge steps may run at once beside this one: the judge pool's limit in a day run (at least 1); 1 in
    any other run, which holds the warehouse alone (lib/core/runlock.py)."""
    if not is_day_run(context.run):
        return 1
    info = context.instance.event_log_storage.get_concurrency_info(JUDGE_POOL)
    return max(1, info.limit or info.slot_count or 1)


def judge_order(context: dg.AssetExecutionContext) -> SideBySide | None:
    """How a day run takes the pairs it must judge: day runs side by side go opposite ways (even days ascending, odd
    descending) and skip what another has answered meanwhile (lib/support/judging.py judge_items); None in any other
    run,
    which judges alone."""
    if not is_day_run(context.run):
        return None
    start, _ = partition_days(context)
    return "descending" if start.toordinal() % 2 else "ascending"
