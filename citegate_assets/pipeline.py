"""Run the nightly job for a range of days, in process, through the same definitions the schedule uses."""

import os
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import dagster as dg

from citegate_assets.defs.resources import PROJECT_ROOT
from citegate_assets.lib.landing import days_in_landing
from citegate_assets.lib.records import EARLIEST_DAY
from citegate_assets.lib.runlock import run_lock
from citegate_assets.lib.warehouse import connect


@dataclass
class RunPlan:
    start: date  # inclusive
    end: date  # inclusive
    note: str = ""


def plan_days(landing: Path, warehouse: Path, start: date | None, end: date | None, today: date | None = None) -> RunPlan:
    """The partition range to run: the given dates, else every day present in the landing folder.

    Today (UTC) is not a partition until it ends: its records are ingested, and gated on the next run.
    """
    today = today or datetime.now(timezone.utc).date()
    last = today - timedelta(days=1)
    note = ""
    if start is None or end is None:
        days = {d for d in days_in_landing(landing, _known_files(warehouse)) if EARLIEST_DAY <= d <= last}
        if not days:
            days = {last}
            note = "no dated records found; running yesterday's partition so every line is still accounted for"
        start = start or min(days)
        end = end or max(days)
    if end > last:
        note = f"{end} is not a complete UTC day yet; gating up to {last} (its records are ingested now)"
        end = last
    if start > end:
        raise ValueError(f"--start {start} is after --end {end}")
    if start < EARLIEST_DAY:
        raise ValueError(f"--start {start} is before the first partition {EARLIEST_DAY}")
    return RunPlan(start, end, note)


def _known_files(warehouse: Path) -> dict:
    if not warehouse.exists():
        return {}
    try:
        with connect(warehouse, read_only=True) as con:
            tables = {t for (t,) in con.sql("select table_name from information_schema.tables").fetchall()}
            if not {"ingested_files", "prompts"} <= tables:
                return {}
            sizes = dict(con.sql("select file_name, size_bytes from ingested_files where status = 'complete'").fetchall())
            days: dict[str, set] = {}
            for name, day in con.sql("select distinct source_file, day from prompts").fetchall():
                days.setdefault(name, set()).add(day)
    except Exception:  # a locked or foreign file: fall back to scanning
        return {}
    return {name: (size, days.get(name, set())) for name, size in sizes.items()}


def run_range(
    plan: RunPlan,
    *,
    landing: Path,
    warehouse: Path,
    config_file: Path | None,
    instance: dg.DagsterInstance | None = None,
    log_level: str = "INFO",
    wait_s: float = 0.0,
    on_wait=None,
) -> dg.ExecuteInProcessResult:
    """Raises RunLockedError when another run holds the warehouse for longer than wait_s."""
    from citegate_assets.definitions import defs

    job = defs().resolve_job_def("nightly_job")
    os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT / "dagster_home"))
    run_config = {
        "resources": {
            "warehouse": {
                "config": {
                    "database": str(warehouse),
                    "landing_folder": str(landing),
                    "config_file": str(config_file) if config_file else "",
                }
            }
        },
        "loggers": {"console": {"config": {"log_level": log_level}}},
    }
    tags = {
        "dagster/asset_partition_range_start": plan.start.isoformat(),
        "dagster/asset_partition_range_end": plan.end.isoformat(),
        "citegate/trigger": "cli",
        WAREHOUSE_TAG: str(Path(warehouse).resolve()),
    }
    with run_lock(warehouse, wait_s=wait_s, on_wait=on_wait):
        instance = instance or dg.DagsterInstance.get()
        release_abandoned_runs(instance, warehouse)
        return job.execute_in_process(run_config=run_config, instance=instance, tags=tags, raise_on_error=False)


WAREHOUSE_TAG = "citegate/warehouse"


def release_abandoned_runs(instance: dg.DagsterInstance, warehouse: Path) -> list[str]:
    """A run killed mid-way (kill -9, power loss) stays STARTED in the instance and keeps its DuckDB pool
    slot, which would block every later run. Called with the run lock held, so no run of this warehouse
    is alive: such runs are marked failed and their slots freed."""
    stuck = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.NOT_STARTED]
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=stuck, tags={WAREHOUSE_TAG: str(Path(warehouse).resolve())}))
    released = []
    for record in records:
        run = record.dagster_run
        instance.report_run_failed(run, message="abandoned: its process ended before the run finished (killed?); slots released")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


def run_calibration(
    *, warehouse: Path, config_file: Path | None, labels: Path | None, instance: dg.DagsterInstance | None = None
) -> dg.ExecuteInProcessResult:
    """Materialize hand_labels → judge_calibration → support_gate_status (the same assets the nightly job runs)."""
    from citegate_assets.defs.calibration import hand_labels, judge_calibration, support_gate_status
    from citegate_assets.defs.resources import JudgeResource, WarehouseResource

    os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT / "dagster_home"))
    resources = {
        "warehouse": WarehouseResource(
            database=str(warehouse), config_file=str(config_file) if config_file else "", labels_path=str(labels) if labels else ""
        ),
        "judge": JudgeResource(),
    }
    return dg.materialize(
        [hand_labels, judge_calibration, support_gate_status],
        resources=resources,
        instance=instance or dg.DagsterInstance.get(),
        tags={"citegate/trigger": "cli-calibrate"},
        raise_on_error=False,
    )
