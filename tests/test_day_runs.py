"""Day partitions side by side (`citegate run --workers N` over several days, citegate_assets/day_runs.py): two
day runs at once write the same rows as one run over the range, the judge's calls stay within [judge] concurrency
across them, and the locks let day runs share the warehouse while a whole run excludes them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import dagster as dg
import pytest

from citegate_assets.day_runs import night_phases
from citegate_assets.definitions import defs
from citegate_assets.defs.asset_defaults import JUDGE_POOL
from citegate_assets.defs.resources import day_assets, is_day_run
from citegate_assets.lib.core.runlock import RunLockedError, open_lock, run_lock
from citegate_assets.lib.loggen import generate_logs

from .judge_server import Reply, ScriptedJudgeServer
from .test_crash_safety import published_state, start_run

DAYS = ("2026-11-02", "2026-11-03")


def answer(req: dict, i: int) -> Reply:
    """The same answer for the same pair whatever the order, slow enough that calls overlap."""
    return Reply("yes" if len(req["messages"][0]["content"]) % 3 else "partial", delay_s=0.01)


def test_two_day_partitions_at_once_write_the_same_tables_as_one_run(tmp_path, dagster_home):
    landing = tmp_path / "landing"
    generate_logs(landing, days=2, requests_per_day=60, seed=21, malformed=False, start_date=DAYS[0])
    config = tmp_path / "c.toml"
    config.write_text("[surfaces.default]\nstakes = 'high'\n[judge]\nconcurrency = 2\nmax_retries = 0\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "CITEGATE_JUDGE_MODEL": "day-judge",
        "CITEGATE_LABELS": str(tmp_path / "no-labels"),
    }
    states, outputs, in_flight = {}, {}, {}
    for workers in (2, 1):  # 2 first: the pool's limit it leaves must not slow a later whole run's judge
        folder = tmp_path / f"w{workers}"
        folder.mkdir()
        with ScriptedJudgeServer(answer) as server:
            run_env = {**env, "CITEGATE_JUDGE_BASE_URL": server.base_url, "CITEGATE_REVIEWS": str(folder / "r")}
            proc = start_run(landing, folder / "w.duckdb", config, run_env, "--workers", str(workers))
            out, _ = proc.communicate(timeout=600)
            assert proc.returncode == 0, out[-3000:]
            in_flight[workers] = server.max_in_flight
        outputs[workers] = out
        states[workers] = published_state(folder / "w.published.duckdb", folder / "w.lake")

    assert "2 day runs, 2 at a time" in outputs[2]
    assert all(f"day {d}: run " in outputs[2] and "succeeded" in outputs[2] for d in DAYS)
    # the same rows readers see, table by table (the files' bytes and run facts aside)
    # the lake's versions and lake_versions name each folder's own tables
    facts = ("published_sha256", "lake", "lake_versions", "prompt_count_history", "metric_week_inputs")
    assert states[1]["support_verdicts"] and states[1]["citation_queue"]
    differ = [t for t in states[1] if t not in facts and states[1][t] != states[2].get(t)]
    assert differ == [], {t: sorted(set(states[1][t]) ^ set(states[2].get(t, [])))[:3] for t in differ}
    assert set(states[1]) == set(states[2])

    # the two day runs overlapped in time, one per partition, beside the head (ingest) and the tail runs
    instance = dg.DagsterInstance.from_config(str(dagster_home))
    day_runs = instance.get_run_records(filters=dg.RunsFilter(tags={"citegate/phase": "day"}))
    assert sorted(r.dagster_run.tags["dagster/partition"] for r in day_runs) == list(DAYS)
    first, second = sorted(day_runs, key=lambda r: r.start_time)
    assert second.start_time < first.end_time, "the two day runs did not run at the same time"
    assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in day_runs)
    assert all(r.dagster_run.asset_selection <= day_assets() for r in day_runs)
    phases = {r.dagster_run.tags.get("citegate/phase") for r in instance.get_run_records()}
    assert {"head", "day", "tail"} <= phases
    # two judge steps at once keep [judge] concurrency (2) in flight between them: the pool's limit is 2
    assert instance.event_log_storage.get_concurrency_info(JUDGE_POOL).limit == 2
    assert in_flight[2] <= 2
    # a whole run afterwards holds the warehouse alone: its judge keeps all of [judge] concurrency in flight
    assert in_flight[1] == 2


def test_the_night_splits_into_head_days_and_tail_covering_every_asset_once():
    graph = defs().resolve_asset_graph()
    phases = night_phases(graph)
    every = [k for k in graph.toposorted_asset_keys if graph.get(k).is_materializable]
    assert sorted(phases.head + phases.days + phases.tail) == sorted(every)
    assert set(phases.days) <= day_assets()
    assert dg.AssetKey("prompts") in phases.head and dg.AssetKey("provenance_results") in phases.days
    assert dg.AssetKey("published_warehouse") in phases.tail
    # nothing in the head depends on a day's gate, nothing in the days on the tail
    for key in phases.head:
        assert not graph.get_ancestor_asset_keys(key) & set(phases.days + phases.tail)
    for key in phases.days:
        assert not graph.get_ancestor_asset_keys(key) & set(phases.tail)


def test_a_run_of_daily_assets_only_is_a_day_run():
    run = dg.DagsterRun(job_name="nightly_job", asset_selection=frozenset({dg.AssetKey("provenance_results")}))
    assert is_day_run(run)
    assert not is_day_run(dg.DagsterRun(job_name="nightly_job"))  # the whole job
    assert not is_day_run(dg.DagsterRun(job_name="nightly_job", asset_selection=frozenset()))  # the same, in process
    assert not is_day_run(
        dg.DagsterRun(
            job_name="nightly_job",
            asset_selection=frozenset({dg.AssetKey("provenance_results"), dg.AssetKey("published_warehouse")}),
        )
    )


def test_a_ui_backfill_is_one_run_per_day():
    graph = defs().resolve_asset_graph()
    for key in day_assets():
        policy = graph.get(key).backfill_policy
        assert policy is not None and policy.max_partitions_per_run == 1, key


def hold(warehouse, *, shared: bool, kind: str = "run"):
    """Another process holding the run lock (shared or not) or the open lock, until killed."""
    take = (
        f"run_lock(pathlib.Path({str(warehouse)!r}), shared={shared})"
        if kind == "run"
        else f"open_lock(pathlib.Path({str(warehouse)!r}))"
    )
    code = textwrap.dedent(
        f"""
        import time, pathlib
        from citegate_assets.lib.core.runlock import run_lock, open_lock
        with {take}:
            print("held", flush=True)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_day_runs_share_the_run_lock_and_a_whole_run_waits_for_them(tmp_path):
    warehouse = tmp_path / "w.duckdb"
    day = hold(warehouse, shared=True)
    waiter = None
    try:
        with run_lock(warehouse, shared=True):  # a second day run goes beside the first
            pass
        # a whole run (wait 0: it would stop at once behind another whole run) waits for the day runs to end
        waiter = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import pathlib; from citegate_assets.lib.core.runlock import run_lock\n"
                f"with run_lock(pathlib.Path({str(warehouse)!r}),\n"
                "              on_wait=lambda h: print('waiting for', h, flush=True)):\n"
                "    print('whole run', flush=True)",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert waiter.stdout.readline().startswith("waiting for day run pid ")
        with pytest.raises(subprocess.TimeoutExpired):
            waiter.wait(timeout=1.5)
    finally:
        day.kill()
        day.wait()
    out, _ = waiter.communicate(timeout=30)
    assert out.strip() == "whole run" and waiter.returncode == 0
    whole = hold(warehouse, shared=False)
    try:
        with pytest.raises(RunLockedError, match=r"\(pid \d+ since"):  # a day run beside a whole one stops
            with run_lock(warehouse, shared=True):
                pass
        with pytest.raises(RunLockedError, match=r"\(pid \d+ since"):  # and so does another whole run
            with run_lock(warehouse):
                pass
    finally:
        whole.kill()
        whole.wait()
    with run_lock(warehouse):
        pass


def test_a_second_process_waits_for_the_warehouse_file_and_then_opens_it(tmp_path):
    warehouse = tmp_path / "w.duckdb"
    holder = hold(warehouse, shared=False, kind="open")
    waits: list[str] = []
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import pathlib
                from citegate_assets.lib.core.runlock import open_lock
                with open_lock(pathlib.Path({str(warehouse)!r})):
                    print("opened", flush=True)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            waiter.wait(timeout=1.5)  # still waiting while the holder has the file
    finally:
        holder.kill()
        holder.wait()
    out, _ = waiter.communicate(timeout=30)
    assert out.strip() == "opened" and waiter.returncode == 0
    # in one process the open lock is re-entrant: a step's nested connection does not wait on itself
    with open_lock(warehouse, on_wait=waits.append), open_lock(tmp_path / "." / "w.duckdb", on_wait=waits.append):
        pass
    assert waits == []


def test_a_night_killed_in_its_day_runs_leaves_what_readers_see_and_a_rerun_completes_it(tmp_path, dagster_home):
    """kill -9 of `citegate run --workers 2` while its day runs judge: the published copy and the lake stay as the
    last complete night left them; the day processes it leaves finish or fail on their own (the judge is gone),
    and a re-run, once they let the lock go, publishes the same rows as before."""
    import signal
    import time

    from .test_crash_safety import by_content, two_judged_days

    landing, config, warehouse, published, lake, env = two_judged_days(tmp_path, dagster_home, 60, 22, 2)
    with ScriptedJudgeServer(by_content) as server:
        first = start_run(
            landing, warehouse, config, {**env, "CITEGATE_JUDGE_BASE_URL": server.base_url}, "--workers", "2"
        )
        out, _ = first.communicate(timeout=600)
        assert first.returncode == 0, out[-3000:]
    before = published_state(published, lake)

    from citegate_assets.lib.storage.warehouse import connect

    with connect(warehouse) as con:  # so the re-run has to call the judge in its day runs
        con.execute("delete from judge_cache")
    with ScriptedJudgeServer(lambda req, i: Reply("yes", delay_s=5)) as slow:
        proc = start_run(
            landing, warehouse, config, {**env, "CITEGATE_JUDGE_BASE_URL": slow.base_url}, "--workers", "2"
        )
        deadline = time.monotonic() + 300
        while not slow.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert slow.requests, "the day runs never reached the judge"
    assert published_state(published, lake) == before  # readers see the last complete night

    with ScriptedJudgeServer(by_content) as server:
        run_env = {**env, "CITEGATE_JUDGE_BASE_URL": server.base_url}
        rerun = start_run(landing, warehouse, config, run_env, "--workers", "2", "--wait", "300")
        out, _ = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, out[-3000:]
    after = published_state(published, lake)
    unchanged_by_design = (
        "published_sha256",
        "lake",
        "lake_versions",
        "judge_cache",
        "prompt_count_history",
        "metric_week_inputs",
    )
    changed = [t for t in before if t not in unchanged_by_design and after.get(t) != before[t]]
    assert changed == [], {t: sorted(set(before[t]) ^ set(after.get(t, [])))[:3] for t in changed}
    # the killed night's day runs are not left STARTED: they ended on their own, or the re-run released them
    instance = dg.DagsterInstance.from_config(str(dagster_home))
    stuck = instance.get_run_records(
        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])
    )
    assert stuck == []
