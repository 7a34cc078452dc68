"""A backfill of two day partitions launched the way the UI launches it: a real `dagster dev` (webserver,
daemon, code server), the webserver's GraphQL `launchPartitionBackfill` mutation with the parameters the UI's
"Materialize" → "Launch backfill" dialog sends, and an instance that admits two runs at once. After a first run
of the unpartitioned assets the days read (launched from the UI too), the backfill of the daily assets and the
unpartitioned ones after them makes one run per day (BackfillPolicy.multi_run(1)); the two day runs share the
warehouse's run lock and go side by side, the unpartitioned assets run after them without failing on the lock,
and the warehouse ends up with the rows `citegate run` writes over the same landing folder.

The daemon is Dagster's own, with shorter waits than its defaults: the run queue dequeues every second (the
instance's run_coordinator dequeue_interval_seconds) and the backfill is evaluated every 2 s instead of 30 s
(tests/daemon_interval/sitecustomize.py sets the constant Dagster has no setting for): the backfill takes the same
steps, without the minutes of idle waiting between them.

The judge is a real HTTP server on 127.0.0.1 answering by content (the same verdicts in any order), slowly enough
that a day run outlasts the daemon's intervals: otherwise one day could end before the other is dequeued, and
nothing would show whether they may overlap; and the daemon sees the days' ingest done while their judge steps
still run, as it does with real volumes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from citegate_assets.day_runs import night_phases
from citegate_assets.definitions import defs
from citegate_assets.defs.resources import day_assets, is_day_run
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.warehouse import connect

from .dagster_dev import DagsterDev
from .judge_server import Reply, ScriptedJudgeServer
from .test_crash_safety import RUN_FACTS

PROJECT = Path(__file__).resolve().parents[1]
DAYS = ("2026-11-02", "2026-11-03")
TABLES = ("provenance_results", "support_verdicts", "citation_queue")
CONFIG = """
[surfaces.default]
stakes = "high"
[judge]
concurrency = 4
max_retries = 0
workers = 1
[ingest]
workers = 1
"""
UNFINISHED = ("REQUESTED", "CANCELING", "FAILING")
DEQUEUE_INTERVAL_S = 1  # Dagster's default: 5
BACKFILL_INTERVAL_S = 2  # Dagster's default: 30
DAEMON_INTERVAL_HOOK = Path(__file__).resolve().parent / "daemon_interval"
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


def answer(req: dict, i: int) -> Reply:
    """The same answer for the same pair whatever the order, mostly partial (so best_evidence judges other passages
    too); 0.05 s a call, 4 in flight: each day's judge steps take about 8 s, several of the daemon's intervals."""
    return Reply("partial" if len(req["messages"][0]["content"]) % 5 else "yes", delay_s=0.05)


def instance_yaml(max_concurrent_runs: int) -> str:
    """The project's dagster.yaml with concurrency.runs.max_concurrent_runs changed and the run queue dequeued
    every DEQUEUE_INTERVAL_S."""
    text = (PROJECT / "dagster_home" / "dagster.yaml").read_text()
    changed, n = re.subn(r"(\n  runs:\n    max_concurrent_runs:) *\d+", rf"\g<1> {max_concurrent_runs}", text)
    assert n == 1, "dagster_home/dagster.yaml no longer sets concurrency.runs.max_concurrent_runs"
    assert "run_coordinator:" not in changed, "dagster_home/dagster.yaml now configures the run coordinator"
    return changed + (
        "\nrun_coordinator:\n  module: dagster._core.run_coordinator\n  class: QueuedRunCoordinator\n"
        f"  config:\n    dequeue_interval_seconds: {DEQUEUE_INTERVAL_S}\n"
    )


def clean_env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEGATE_", "DAGSTER_"))}
    return env | values


@pytest.fixture
def landing(tmp_path):
    path = tmp_path / "landing"
    generate_logs(path, days=2, requests_per_day=100, seed=16, malformed=False, start_date=DAYS[0])
    return path


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "citegate.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def judge():
    with ScriptedJudgeServer(answer) as server:
        yield server


@pytest.fixture
def reference(tmp_path, landing, config_file, judge):
    """`citegate run` over the same days and landing folder into another warehouse (and instance), started now
    and collected when the test asks: it runs while dagster dev starts."""
    folder = tmp_path / "cli"
    folder.mkdir()
    env = clean_env(
        CITEGATE_FIRST_DAY=DAYS[0], CITEGATE_JUDGE_BASE_URL=judge.base_url, CITEGATE_JUDGE_MODEL="backfill-judge"
    )
    cmd = [
        *(sys.executable, "-m", "citegate_assets.cli", "run", "--quiet"),
        *("--logs", str(landing), "--warehouse", str(folder / "w.duckdb"), "--config", str(config_file)),
        *("--labels", str(folder / "no-labels"), "--reviews", str(folder / "reviews")),
        *("--dagster-home", str(folder / "dagster_home"), "--start", DAYS[0], "--end", DAYS[-1]),
    ]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def result() -> Path:
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"citegate run failed ({proc.returncode}):\n{out[-4000:]}"
        return folder / "w.duckdb"

    yield result
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture
def ui(tmp_path, landing, config_file, judge):
    """dagster dev on 127.0.0.1 over the project's workspace.yaml, its instance in tmp_path with two runs at once,
    every citegate path in tmp_path; stopped (process group and all) whatever the test's outcome."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(instance_yaml(max_concurrent_runs=2))
    (tmp_path / "ui").mkdir()
    env = clean_env(
        DAGSTER_HOME=str(home),
        CITEGATE_WAREHOUSE=str(tmp_path / "ui" / "w.duckdb"),
        CITEGATE_LOGS=str(landing),
        CITEGATE_CONFIG=str(config_file),
        CITEGATE_LABELS=str(tmp_path / "ui" / "no-labels"),
        CITEGATE_REVIEWS=str(tmp_path / "ui" / "reviews"),
        CITEGATE_FIRST_DAY=DAYS[0],
        CITEGATE_JUDGE_BASE_URL=judge.base_url,
        CITEGATE_JUDGE_MODEL="backfill-judge",
        CITEGATE_TEST_DAEMON_INTERVAL_S=str(BACKFILL_INTERVAL_S),
        PYTHONPATH=os.pathsep.join(filter(None, [str(DAEMON_INTERVAL_HOOK), os.environ.get("PYTHONPATH")])),
    )
    # the instance's sqlite storages created here first: dagster dev's webserver, daemon and code server start at
    # once, and each creating them would race on alembic's version table ("more than one head present")
    instance = dg.DagsterInstance.from_config(str(home))
    instance.get_runs(limit=1)
    instance.event_log_storage.get_concurrency_keys()
    instance.schedule_storage.all_instigator_state() if instance.schedule_storage else None
    dev = DagsterDev(env, tmp_path / "dagster-dev.log")
    try:
        yield dev, instance, Path(env["CITEGATE_WAREHOUSE"])
    finally:
        dev.stop()


def rows(warehouse: Path, table: str) -> list[tuple]:
    """The table's rows, leaving out write times and the facts of the judge call that made them."""
    with connect(warehouse, read_only=True) as con:
        columns = [
            c
            for (c,) in con.execute(
                "select column_name from duckdb_columns() where table_name = $t "
                "and data_type not like 'TIMESTAMP%' and not list_contains($run_facts, column_name) "
                "order by column_index",
                {"t": table, "run_facts": RUN_FACTS},
            ).fetchall()
        ]
        quoted = ", ".join(f'"{c}"' for c in columns)
        found = con.sql(f'select {quoted} from "{table}" order by all').fetchall()
    return [tuple(tuple(v) if isinstance(v, list) else v for v in row) for row in found]  # lists: hashable


def days_of(warehouse: Path, table: str) -> set[str]:
    with connect(warehouse, read_only=True) as con:
        return {str(d) for (d,) in con.sql(f'select distinct day from "{table}"').fetchall()}


def run_day(run: dg.DagsterRun) -> str | None:
    """The one day a run materializes: its partition tag, or the range Dagster tags a multi_run(1) backfill run
    with (start = end); None for an unpartitioned run. A range of several days is no day run."""
    if "dagster/partition" in run.tags:
        return run.tags["dagster/partition"]
    start, end = run.tags.get(RANGE_START), run.tags.get(RANGE_END)
    if start is None:
        return None
    assert start == end, f"run {run.run_id} covers {start} .. {end}, not one day"
    return start


def describe_runs(instance: dg.DagsterInstance, filters: dg.RunsFilter) -> str:
    """Each run: status, day, times, assets, and why it failed."""
    lines = []
    for r in sorted(instance.get_run_records(filters=filters), key=lambda r: r.create_timestamp):
        run = r.dagster_run
        assets = sorted(k.to_user_string() for k in run.asset_selection or ())
        day = run.tags.get("dagster/partition") or run.tags.get(RANGE_START)
        lines.append(
            f"  {run.run_id[:8]} {run.status.value:<9} day={day} start={r.start_time} end={r.end_time} assets={assets}"
        )
        if run.status == dg.DagsterRunStatus.FAILURE:
            for entry in instance.all_logs(run.run_id):
                event = entry.dagster_event
                if event is None or event.event_type not in (
                    dg.DagsterEventType.STEP_FAILURE,
                    dg.DagsterEventType.RUN_FAILURE,
                    dg.DagsterEventType.ENGINE_EVENT,
                ):
                    continue
                info = getattr(event.event_specific_data, "error", None)
                if event.event_type == dg.DagsterEventType.ENGINE_EVENT and info is None:
                    continue
                causes = []
                while info is not None:  # the error and what caused it (e.g. the run lock's refusal)
                    causes.append(info.message.strip())
                    info = info.cause
                lines.append(f"    {event.event_type_value}: {event.message} {' <- '.join(causes)}"[:2000])
    return "\n".join(lines)


def test_a_ui_backfill_of_two_days_runs_them_side_by_side_and_writes_what_citegate_run_writes(ui, reference):
    dev, instance, warehouse = ui
    phases = night_phases(defs().resolve_asset_graph())
    # the UI's backfill takes ingest with the other daily assets: before = the head without ingest
    daily = [k for k in phases.head if k in day_assets()] + phases.days
    before, after = [k for k in phases.head if k not in day_assets()], phases.tail
    graph = defs().resolve_asset_graph()
    t0 = time.monotonic()
    dev.wait_ready(timeout=150)
    ready_s = time.monotonic() - t0

    # the warehouse's first run: the unpartitioned assets the days read (metric definitions, review outcomes,
    # labels, calibration), materialized from the UI as one run, as a user would before backfilling days
    setup_id = dev.launch_asset_run(
        [k.path for k in before],
        [(c.asset_key.path, c.name) for c in graph.asset_check_keys if c.asset_key in before],
        {"dagster/from_ui": "true"},
    )
    setup = dev.wait_for(
        lambda: (record := instance.get_run_record_by_id(setup_id)) and record.dagster_run.is_finished and record,
        timeout=120,
        what=f"the setup run {setup_id} finished",
        describe=lambda: describe_runs(instance, dg.RunsFilter(run_ids=[setup_id])),
    )
    assert setup.dagster_run.status == dg.DagsterRunStatus.SUCCESS, describe_runs(
        instance, dg.RunsFilter(run_ids=[setup_id])
    )

    # what the dialog sends for an asset selection in the global asset graph (the hidden asset job): the
    # selection, the chosen partitions, fromFailure false, and the UI's execution tag
    t1 = time.monotonic()
    backfill_id = dev.launch_partition_backfill(
        {
            "assetSelection": [{"path": k.path} for k in daily + after],
            "partitionNames": list(DAYS),
            "fromFailure": False,
            "tags": [{"key": "dagster/from_ui", "value": "true"}],
        }
    )
    of_backfill = dg.RunsFilter(tags={"dagster/backfill": backfill_id})

    def describe() -> str:
        return f"backfill: {dev.backfill(backfill_id)}\nits runs:\n{describe_runs(instance, of_backfill)}"

    def finished() -> dict | None:
        state = dev.backfill(backfill_id)
        assert state["__typename"] == "PartitionBackfill", f"backfill {backfill_id}: {state}"
        runs = instance.get_run_records(filters=of_backfill)
        if state["status"] in UNFINISHED or any(not r.dagster_run.is_finished for r in runs):
            return None
        return state

    state = dev.wait_for(finished, timeout=240, what=f"backfill {backfill_id} finished", describe=describe)
    diagnostics = f"{describe()}\n{dev.tail()}"
    print(f"dagster dev ready in {ready_s:.0f}s, backfill done in {time.monotonic() - t1:.0f}s\n{diagnostics}")

    records = instance.get_run_records(filters=of_backfill)
    day_runs = [r for r in records if run_day(r.dagster_run) is not None]
    other_runs = [r for r in records if run_day(r.dagster_run) is None]

    # 1. one run per day, of the daily assets only, tagged with its day and the backfill
    assert sorted(run_day(r.dagster_run) for r in day_runs) == list(DAYS), diagnostics
    for r in day_runs:
        run = r.dagster_run
        assert run.tags["dagster/backfill"] == backfill_id and run.tags.get("dagster/from_ui") == "true"
        assert run.asset_selection == frozenset(daily), diagnostics
        assert is_day_run(run), diagnostics  # so its warehouse resource holds the run lock shared

    # 2. both day runs succeeded, side by side: the later one started before the earlier one ended
    assert [r.dagster_run.status for r in day_runs] == [dg.DagsterRunStatus.SUCCESS] * 2, diagnostics
    first, second = sorted(day_runs, key=lambda r: r.start_time)
    assert second.start_time < first.end_time, f"the two day runs did not overlap\n{diagnostics}"
    for key in daily:
        done = instance.get_materialized_partitions(key)
        assert set(DAYS) <= done, f"{key.to_user_string()}: {sorted(done)}\n{diagnostics}"

    # 3. the days' rows are the ones `citegate run` writes over the same landing folder into another warehouse
    cli_warehouse = reference()
    for table in TABLES:
        ui_rows, cli_rows = rows(warehouse, table), rows(cli_warehouse, table)
        assert days_of(warehouse, table) == set(DAYS), f"{table}: rows of {sorted(days_of(warehouse, table))}"
        missing, extra = sorted(set(cli_rows) - set(ui_rows)), sorted(set(ui_rows) - set(cli_rows))
        assert (missing, extra) == ([], []) and len(ui_rows) == len(cli_rows), (
            f"{table}: {len(ui_rows)} rows after the backfill, {len(cli_rows)} after citegate run; "
            f"only citegate run's: {missing[:3]}; only the backfill's: {extra[:3]}"
        )

    # 1. and 2. (continued) the unpartitioned assets after the days, each once, in runs of their own that take the
    # warehouse exclusively. Dagster launches each as soon as its daily parents are in (text_retention once both
    # days are ingested, support_gate_status once both are judged, the metrics once both are queued), so one may
    # be dequeued while a day run still holds the warehouse: it must wait for the days, never fail beside them
    assert other_runs, diagnostics
    assert not any(is_day_run(r.dagster_run) for r in other_runs), diagnostics  # they hold the run lock exclusively
    failed = {r.dagster_run.run_id[:8]: r.dagster_run.status.value for r in records if not is_success(r)}
    assert failed == {}, f"runs of the backfill that did not succeed: {failed} (why: below)\n{diagnostics}"
    selected = [k for r in other_runs for k in r.dagster_run.asset_selection or ()]
    assert sorted(selected) == sorted(after), diagnostics
    days_done = max(last_step_event(instance, r.dagster_run.run_id) for r in day_runs)
    for r in other_runs:
        assert first_step_start(instance, r.dagster_run.run_id) >= days_done, diagnostics
    assert state["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), diagnostics
    for key in after:
        assert instance.get_latest_materialization_event(key) is not None, f"{key.to_user_string()}\n{diagnostics}"


def is_success(record: dg.RunRecord) -> bool:
    return record.dagster_run.status == dg.DagsterRunStatus.SUCCESS


def first_step_start(instance: dg.DagsterInstance, run_id: str) -> float:
    return min(e.timestamp for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START))


def last_step_event(instance: dg.DagsterInstance, run_id: str) -> float:
    """When the run's last step ended (its last write to the warehouse)."""
    kinds = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
    return max(e.timestamp for e in instance.all_logs(run_id, of_type=kinds))
