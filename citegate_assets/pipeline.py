"""Run the nightly job for a range of days, in process, through the same definitions the schedule uses."""

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import dagster as dg

from citegate_assets.day_runs import NightResult, day_list, run_night_in_parallel
from citegate_assets.lib.config import Config, parse_config
from citegate_assets.lib.core.paths import Settings, prepare_dagster_home
from citegate_assets.lib.core.paths import resolve as resolve_settings
from citegate_assets.lib.core.runlock import run_lock
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.ingest.landing import days_in_landing
from citegate_assets.lib.ingest.records import EARLIEST_DAY
from citegate_assets.lib.retention.drop_text import retained_days
from citegate_assets.lib.storage.warehouse import connect, query


@dataclass
class RunPlan:
    start: date  # inclusive
    end: date  # inclusive
    note: str = ""


def plan_days(
    landing: Path,
    warehouse: Path,
    start: date | None,
    end: date | None,
    today: date | None = None,
    *,
    config: Config | None = None,
) -> RunPlan:
    """The partition range to run: the given dates, else every day of a valid record in the landing folder.

    Days come from valid records only: a rejected line, however it is dated, never widens a run.
    Today (UTC) is not a partition until it ends: its records are ingested, and gated on the next run.
    config: the run's (its [ingest] bounds and [adapters] settings read the files as ingest will: a trace
    file's calls give their days); None: the built-in defaults.
    """
    today = today or utc_now().date()
    last = today - timedelta(days=1)
    note = ""
    if start is None or end is None:
        cfg = config or parse_config({}, None)
        found = days_in_landing(
            landing,
            _known_files(warehouse, landing),
            max_line_bytes=cfg.ingest.max_line_bytes,
            max_inflated_bytes=cfg.ingest.max_decompressed_bytes,
            adapter_settings=cfg.adapters.settings(),
            max_trace_bytes=cfg.adapters.max_file_bytes,
        )
        days = {d for d in found if EARLIEST_DAY <= d <= last}
        if (retained := _last_retained_day(warehouse)) and any(d <= retained for d in days):
            # their text is gone ([retention] text_days): their stored verdicts stand, a run over them is refused
            days = {d for d in days if d > retained}
            note = f"days up to {retained} hold no text any more ([retention] text_days): not gated again"
        if not days:
            days = {last}
            later = sorted(d for d in found if d > last)
            why = (
                f"the landing folder holds records of {', '.join(map(str, later))} only, not a complete UTC day "
                f"yet: they are ingested now and gated on the next run; running {last} so every line is still "
                "accounted for"
                if later
                else f"no valid dated records found; running {last} so every line is still accounted for"
            )
            note = f"{note}; {why}" if note else why
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


def _last_retained_day(warehouse: Path) -> date | None:
    """The newest day whose text retention dropped, or None (no warehouse yet, or one it cannot read)."""
    if not Path(warehouse).exists():
        return None
    try:
        with connect(warehouse, read_only=True) as con:
            days = retained_days(con)
    except Exception:  # a locked or older file: plan as before; the run's check still refuses a retained day
        return None
    return max(days) if days else None


def _known_files(warehouse: Path, landing: Path) -> dict:
    """Files of this landing folder read to their end before: name -> (size, mtime_ns, days of their valid records)."""
    if not Path(warehouse).exists():
        return {}
    try:
        with connect(warehouse, read_only=True) as con:
            rows = query(con, "ingest/complete_files", {"landing": os.path.realpath(landing)}).fetchall()
    except Exception:  # a locked, older or foreign file: fall back to scanning
        return {}
    return {name: (size, mtime, set(days or ())) for name, size, mtime, days in rows}


def run_range(
    plan: RunPlan,
    *,
    landing: Path | None = None,
    warehouse: Path | None = None,
    config_file: Path | None = None,
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
    log_level: str = "INFO",
    wait_s: float = 0.0,
    on_wait: Callable[[str], None] | None = None,
    final: bool = False,
    workers: int | None = None,
    say: Callable[[str], None] | None = None,
    shards: int | None = None,
) -> dg.ExecuteInProcessResult | NightResult:
    """Raises RunLockedError when another run holds the warehouse for longer than wait_s.

    final: every landing file counts as finished (`citegate run --final`): an unterminated last line is a line.
    workers: `citegate run --workers N`: over several days, N day partitions at once (day_runs.py: ingest,
    then one run per day, then the metrics and the publish); over one day, ingest's parse processes and the
    offline judge's, overriding [ingest] workers and [judge] workers (None: as configured).
    say: where the day runs' progress goes (one line per run).
    shards: `citegate run --shards N`: ingest split across N shard processes, overriding [ingest] shards.

    settings: what the CLI resolved and printed; without it, landing, warehouse and config_file are
    the flags and everything is resolved here (lib/core/paths.py). The run uses exactly these paths:
    every one goes into the resources' run config."""
    from citegate_assets.definitions import loaded_defs
    from citegate_assets.defs.partitions import before_first_day
    from citegate_assets.defs.resources import run_config_for

    if problem := before_first_day(plan.start, plan.end):
        raise ValueError(problem)
    settings = settings or resolve_settings(config=config_file, landing=landing, warehouse=warehouse)
    warehouse = settings.warehouse
    job = loaded_defs().resolve_job_def("nightly_job")
    run_config = {
        "resources": run_config_for(settings, final_read=final, workers=workers, shards=shards),
        "loggers": {"console": {"config": {"log_level": log_level}}},
    }
    tags = {
        "dagster/asset_partition_range_start": plan.start.isoformat(),
        "dagster/asset_partition_range_end": plan.end.isoformat(),
        "citegate/trigger": "cli",
        WAREHOUSE_TAG: str(Path(warehouse).resolve()),
    }
    days = day_list(plan.start, plan.end)
    if (workers or 0) > 1 and len(days) > 1:  # the day partitions side by side (day_runs.py)
        night_instance = instance or dagster_instance(settings)
        untagged = {k: v for k, v in tags.items() if not k.startswith("dagster/asset_partition_range")}
        return run_night_in_parallel(
            days,
            settings=settings,
            run_config=run_config,
            tags=untagged,
            workers=int(workers or 1),
            instance=night_instance,
            wait_s=wait_s,
            on_wait=on_wait,
            release=lambda: release_abandoned_runs(night_instance, warehouse),
            say=say or (lambda _text: None),
        )
    with run_lock(warehouse, wait_s=wait_s, on_wait=on_wait):
        instance = instance or dagster_instance(settings)
        release_abandoned_runs(instance, warehouse)
        return job.execute_in_process(run_config=run_config, instance=instance, tags=tags, raise_on_error=False)


WAREHOUSE_TAG = "citegate/warehouse"


def release_abandoned_runs(instance: dg.DagsterInstance, warehouse: Path) -> list[str]:
    """A run killed mid-way (kill -9, power loss) stays STARTED in the instance and keeps its DuckDB pool
    slot, which would block every later run. Called with the run lock held, so no run of this warehouse
    is alive: such runs are marked failed and their slots freed."""
    stuck = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.NOT_STARTED]
    records = instance.get_run_records(
        filters=dg.RunsFilter(statuses=stuck, tags={WAREHOUSE_TAG: str(Path(warehouse).resolve())})
    )
    released = []
    for record in records:
        run = record.dagster_run
        instance.report_run_failed(
            run, message="abandoned: its process ended before the run finished (killed?); slots released"
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released


def run_calibration(
    *,
    warehouse: Path | None = None,
    config_file: Path | None = None,
    labels: Path | None = None,
    settings: Settings | None = None,
    instance: dg.DagsterInstance | None = None,
    log_level: str = "WARNING",
) -> dg.ExecuteInProcessResult:
    """Materialize hand_labels → judge_calibration → support_gate_status (the same assets the nightly job runs),
    then published_warehouse: readers open only the published copy, so a calibration they cannot see would
    leave `citegate queue`/`metrics` on the old gate status. Same asset, same target (settings.published)
    as the nightly run's last step; it runs only when the calibration steps succeeded."""
    from citegate_assets.defs.calibration import hand_labels, judge_calibration, support_gate_status
    from citegate_assets.defs.metrics import published_warehouse
    from citegate_assets.defs.resources import default_resources, run_config_for

    settings = settings or resolve_settings(config=config_file, warehouse=warehouse, labels=labels)
    # calibrate writes the warehouse too: it stops at once (RunLockedError) while a run holds it
    with run_lock(settings.warehouse, hint="try `citegate calibrate` again when it ends"):
        return dg.materialize(
            [hand_labels, judge_calibration, support_gate_status, published_warehouse],
            resources=default_resources(),
            instance=instance or dagster_instance(settings),
            run_config={
                "resources": run_config_for(settings),
                "loggers": {"console": {"config": {"log_level": log_level}}},
            },
            tags={"citegate/trigger": "cli-calibrate"},
            raise_on_error=False,
        )


def within_partitions(plan: RunPlan, *, dates_given: bool) -> RunPlan:
    """Keep a planned range inside the daily partitions (defs/partitions.py, CITEGATE_FIRST_DAY). Days the
    user named are refused with what to set; a range taken from the landing folder starts at the first
    partition instead, and the older days are named in the note (their records are still ingested)."""
    from citegate_assets.defs.partitions import FIRST_DAY, FIRST_DAY_ENV, before_first_day

    problem = before_first_day(plan.start, plan.end)
    if problem is None:
        return plan
    if dates_given or plan.end < FIRST_DAY:
        raise ValueError(problem)
    note = (
        f"records of {plan.start} .. {FIRST_DAY - timedelta(days=1)} are before the first daily partition {FIRST_DAY}: "
        f"ingested, not gated (set {FIRST_DAY_ENV}={plan.start} to gate them)"
    )
    return RunPlan(FIRST_DAY, plan.end, "; ".join(n for n in (plan.note, note) if n))


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The instance in settings.dagster_home ($DAGSTER_HOME, else dagster_home/ beside the warehouse,
    created with the package's dagster.yaml)."""
    home = prepare_dagster_home(settings)
    if os.environ.get("DAGSTER_HOME") and Path(os.environ["DAGSTER_HOME"]).resolve() == home:
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.from_config(str(home))
