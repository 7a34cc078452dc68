"""Settings the stages' assets share, defined once: the DuckDB writer pool, and what every daily asset has."""

from __future__ import annotations

from typing import TypedDict

import dagster as dg

from .partitions import daily_partitions

# every asset that opens the warehouse runs in this pool; dagster_home/dagster.yaml gives pools one slot,
# because DuckDB allows a single writer per file
DUCKDB_POOL = "citegate_duckdb"


class DailyAssetSettings(TypedDict):
    partitions_def: dg.PartitionsDefinition
    backfill_policy: dg.BackfillPolicy
    pool: str


# a daily asset: partitioned by the UTC day, one run for a whole range of days (single-run backfills)
DAILY = DailyAssetSettings(
    partitions_def=daily_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    pool=DUCKDB_POOL,
)
