"""`citegate run --workers N` over several days: the day partitions run side by side, N at a time.

A night is three phases, each a Dagster run in the same instance, so the UI shows every one:
1. the whole-night head (exclusive run lock): the unpartitioned assets no day depends on the output of
   (metric definitions, review outcomes, hand labels, calibration) and ingest over the whole range, whose
   parse processes are the N workers;
2. one day run per day (shared run lock), N at a time in a pool of spawned processes, each an in-process
   Dagster run of the daily assets after ingest for one partition key; they take turns at the DuckDB file
   (lib/core/runlock.py, the open lock) while their Python work (the numeric check, the offline judge) runs at once;
   the steps that call the judge take a slot of the `citegate_judge` pool, whose limit is set to N;
3. the whole-night tail (exclusive): retention, the gate status, the weekly metrics and the publish, once.

A failed phase stops the night where a single run would have: no day run after a failed head, no tail after a
failed day (the other days still finish, as in a backfill)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from citegate_assets.lib.core.paths import Settings
from citegate_assets.lib.core.processes import spawned_pool
from citegate_assets.lib.core.runlock import run_lock

PHASE_TAG = "citegate/phase"


@dataclass
class NightResult:
    """The night's runs, read like one ExecuteInProcessResult (success, run_id, all_events, check evaluations)."""

    run_ids: list[str]
    success: bool
    all_events: list[dg.DagsterEvent] = field(default_factory=list)
    days: dict[str, bool] = field(default_factory=dict)  # day -> its run succeeded

    @property
    def run_id(self) -> str:
        """The night's runs in a line: the head's id … the last one's (each was printed as it ended)."""
        if len(self.run_ids) <= 2:
            return ", ".join(self.run_ids)
        return f"{self.run_ids[0]} … {self.run_ids[-1]} ({len(self.run_ids)} runs)"

    def get_asset_check_evaluations(self) -> list[Any]:
        return [
            e.event_specific_data
            for e in self.all_events
            if e.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION and e.event_specific_data is not None
        ]


@dataclass(frozen=True)
class Phases:
    head: list[dg.AssetKey]  # unpartitioned assets upstream of the days, and ingest
    days: list[dg.AssetKey]  # the daily assets after ingest
    tail: list[dg.AssetKey]


def night_phases(graph: Any) -> Phases:
    """Split the nightly job's assets: ingest's tables are the daily assets without a daily parent."""
    keys = [k for k in graph.toposorted_asset_keys if graph.get(k).is_materializable]
    daily = {k for k in keys if graph.get(k).partitions_def is not None}
    ingest = {k for k in daily if not any(p in daily for p in graph.get(k).parent_keys)}
    after_days = {k for k in keys if k not in daily and graph.get_ancestor_asset_keys(k) & daily}
    return Phases(
        head=[k for k in keys if k in ingest or (k not in daily and k not in after_days)],
        days=[k for k in keys if k in daily and k not in ingest],
        tail=[k for k in keys if k in after_days],
    )


def run_night_in_parallel(
    days: Sequence[date],
    *,
    settings: Settings,
    run_config: dict,
    tags: dict[str, str],
    workers: int,
    instance: dg.DagsterInstance,
    wait_s: float,
    on_wait: Callable[[str], None] | None,
    release: Callable[[], object],
    say: Callable[[str], None] = print,
) -> NightResult:
    """Phases 1-3 above. release(): frees runs a killed process left (called with the lock held exclusively)."""
    from citegate_assets.definitions import loaded_defs
    from citegate_assets.defs.asset_defaults import JUDGE_POOL

    job = loaded_defs().resolve_job_def("nightly_job")
    phases = night_phases(loaded_defs().resolve_asset_graph())
    at_once = max(1, min(workers, len(days)))
    range_tags = {
        **tags,
        "dagster/asset_partition_range_start": days[0].isoformat(),
        "dagster/asset_partition_range_end": days[-1].isoformat(),
    }
    night = NightResult(run_ids=[], success=False)

    def whole_run(what: str, run_tags: dict[str, str], selection: list[dg.AssetKey]) -> bool:
        """A head or tail run, in this process (the caller holds the run lock exclusively)."""
        t0 = time.monotonic()
        result = job.execute_in_process(
            run_config=run_config, instance=instance, tags=run_tags, asset_selection=selection, raise_on_error=False
        )
        outcome = "succeeded" if result.success else "failed"
        say(f"{what}: run {result.run_id} {outcome} in {time.monotonic() - t0:.1f}s")
        night.run_ids.append(result.run_id)
        night.all_events.extend(result.all_events)
        return bool(result.success)

    pool = spawned_pool(at_once)  # the day processes exit with this one, however it dies
    try:
        # the day processes import Dagster and load the definitions while ingest runs
        warming = [pool.submit(warm_up) for _ in range(at_once)]
        with run_lock(settings.warehouse, wait_s=wait_s, on_wait=on_wait):
            release()
            instance.event_log_storage.set_concurrency_slots(JUDGE_POOL, at_once)
            if not whole_run("ingest and the night's head", {**range_tags, PHASE_TAG: "head"}, phases.head):
                return night
        for w in warming:
            w.result()
        # the day runs hold the run lock shared, and so does this process meanwhile: no whole run can start
        # until the last day ends (one may between the head and here: each run is whole in itself)
        with run_lock(settings.warehouse, wait_s=wait_s, on_wait=on_wait, shared=True):
            day_config = _with_workers(run_config, max(1, workers // at_once))
            jobs = [
                (settings.dagster_home, day.isoformat(), day_config, {**tags, PHASE_TAG: "day"}, phases.days)
                for day in days
            ]
            say(f"{len(days)} day runs, {at_once} at a time")
            futures = {pool.submit(run_one_day, *args): args[1] for args in jobs}
            for future in as_completed(futures):
                day = futures[future]
                try:
                    run_id, ok, seconds = future.result()
                except Exception as exc:  # the day's process died (killed, out of memory): the day failed
                    night.days[day] = False
                    say(f"day {day}: its process ended before the run did ({type(exc).__name__}: {exc})")
                    continue
                night.days[day] = ok
                night.run_ids.append(run_id)
                say(f"day {day}: run {run_id} {'succeeded' if ok else 'failed'} in {seconds:.1f}s")
    finally:
        # each day process has ended its run (and let its locks go) or never started one: it exits on its own
        # while the tail runs (waiting for the exits cost about a second)
        pool.shutdown(wait=False, cancel_futures=True)
    for run_id in night.run_ids[1:]:
        night.all_events.extend(
            entry.dagster_event for entry in instance.all_logs(run_id) if entry.dagster_event is not None
        )
    if not all(night.days.values()):
        return night
    with run_lock(settings.warehouse, wait_s=wait_s, on_wait=on_wait):
        night.success = whole_run("metrics and the publish", {**tags, PHASE_TAG: "tail"}, phases.tail)
    return night


@functools.cache
def nightly_job() -> dg.JobDefinition:
    """The nightly job, loaded once per day process."""
    from citegate_assets.dagster_warnings import hide_dagster_warnings
    from citegate_assets.definitions import loaded_defs

    hide_dagster_warnings()
    return loaded_defs().resolve_job_def("nightly_job")


def warm_up() -> int:
    """Load the definitions in a day process ahead of its first day."""
    nightly_job()
    return os.getpid()


def run_one_day(
    dagster_home: Path, day: str, run_config: dict, tags: dict[str, str], selection: list[dg.AssetKey]
) -> tuple[str, bool, float]:
    """One day's run in a spawned process: (run id, success, seconds)."""
    t0 = time.monotonic()
    instance = dg.DagsterInstance.from_config(str(dagster_home))
    result = nightly_job().execute_in_process(
        run_config=run_config,
        instance=instance,
        partition_key=day,
        tags=tags,
        asset_selection=selection,
        raise_on_error=False,
    )
    return result.run_id, bool(result.success), time.monotonic() - t0


def _with_workers(run_config: dict, workers: int) -> dict:
    """The run config with the in-step processes of one day run ([ingest]/[judge] workers)."""
    resources = dict(run_config["resources"])
    citegate = {
        **resources["citegate_config"],
        "config": {**resources["citegate_config"]["config"], "workers": workers},
    }
    return {**run_config, "resources": {**resources, "citegate_config": citegate}}


def day_list(start: date, end: date) -> list[date]:
    return [start + timedelta(days=i) for i in range((end - start).days + 1)]
