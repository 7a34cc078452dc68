"""kill -9 in the middle of ingestion and in the middle of judging, then run again: no duplicate row,
no lost row, and judge calls already cached are not repeated; a killed re-run of a day leaves what readers see
as it was, and a re-run to the end changes none of it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.warehouse import connect

from .helpers import lake_versions
from .judge_server import Reply, ScriptedJudgeServer

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_run(landing, warehouse, config, env, *extra):
    cmd = [sys.executable, "-m", "citegate_assets.cli", "run", "--logs", str(landing), "--warehouse", str(warehouse)]
    if config:
        cmd += ["--config", str(config)]
    cmd += extra
    return subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def counts(warehouse):
    with connect(warehouse, read_only=True) as con:
        return {
            "prompts": con.sql("select count(*), count(distinct request_id) from prompts").fetchall()[0],
            "citations": con.sql("select count(*), count(distinct citation_id) from citations").fetchall()[0],
            "provenance": con.sql("select count(*), count(distinct citation_id) from provenance_results").fetchall()[0],
            "ledger": con.sql(
                "select sum(lines_read), sum(records_ingested), sum(records_rejected), bool_and(status = 'complete') "
                "from ingested_files"
            ).fetchall()[0],
            "rejects": con.sql("select count(*) from ingest_rejects").fetchall()[0][0],
        }


def test_kill_during_ingestion_then_rerun(tmp_path, dagster_home):
    landing = tmp_path / "landing"
    # three batches of at most 2,000 lines: killed once the second is announced (the first committed, the last unread)
    summary = generate_logs(landing, days=2, requests_per_day=2600, seed=9, prompt_kb=1, malformed=True)
    warehouse = tmp_path / "w.duckdb"
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    proc = start_run(landing, warehouse, None, env)
    seen = []
    for line in proc.stdout:  # batch k is announced once batch k-1 is committed: kill after a few
        seen.append(line)
        if sum("lines read" in s for s in seen) >= 2:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert any("lines read" in line for line in seen), "".join(seen[-20:])
    partial = counts(warehouse)
    assert 0 < partial["prompts"][0] < summary["records"]  # killed mid-way
    rerun = start_run(landing, warehouse, None, env)
    out, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, out[-3000:]
    after = counts(warehouse)
    n_prompts = after["prompts"][0]
    assert after["prompts"][0] == after["prompts"][1]  # no duplicate row
    assert after["citations"][0] == after["citations"][1] == after["provenance"][0] == after["provenance"][1]
    lines_read, ingested, rejected, complete = after["ledger"]
    assert (
        complete and lines_read == ingested + rejected == summary["records"] + summary["malformed_lines"]
    )  # no lost row
    assert ingested == n_prompts and rejected == after["rejects"]


JUDGE_CHUNK = 128  # answers written every this many calls (CHUNK, 1,024 in a real run): the kill's test on less data
RUN_WITH_SMALL_CHUNKS = (
    "import sys\n"
    "from citegate_assets.lib.support import judging\n"
    "assert 'chunk' in judging.judge_items.__kwdefaults__\n"
    f"judging.judge_items.__kwdefaults__['chunk'] = {JUDGE_CHUNK}\n"
    "from citegate_assets.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def start_run_in_small_chunks(landing, warehouse, config, env):
    cmd = [sys.executable, "-c", RUN_WITH_SMALL_CHUNKS, "run", "--logs", str(landing), "--warehouse", str(warehouse)]
    cmd += ["--config", str(config)]
    return subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_kill_during_judging_keeps_cached_calls(tmp_path, dagster_home):
    landing = tmp_path / "landing"
    generate_logs(landing, days=1, requests_per_day=160, seed=4, malformed=False)  # about 360 judged citations
    config = tmp_path / "c.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\n[judge]\nconcurrency = 8\nmax_retries = 0\ntimeout_s = 10\n"
    )
    warehouse = tmp_path / "w.duckdb"
    with ScriptedJudgeServer(lambda req, i: Reply("yes", delay_s=0.02)) as server:
        env = {
            **os.environ,
            "DAGSTER_HOME": str(dagster_home),
            "CITEGATE_JUDGE_BASE_URL": server.base_url,
            "CITEGATE_JUDGE_MODEL": "crash-judge",
            "CITEGATE_LABELS": str(tmp_path / "no-labels"),
        }
        proc = start_run_in_small_chunks(landing, warehouse, config, env)
        deadline = time.monotonic() + 120
        past_first_chunk = JUDGE_CHUNK + 16
        while len(server.requests) < past_first_chunk and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert len(server.requests) >= past_first_chunk
    with connect(warehouse, read_only=True) as con:
        cached = {p for (p,) in con.sql("select passage_sha256 || claim_sha256 from judge_cache").fetchall()}
    assert len(cached) > 0  # answers are written chunk by chunk, before the kill
    # the restart talks to a server of its own (the cache key has no URL), so a request of the killed run
    # that its server is still reading can never be counted as the restart's; a cut body is no call anyway
    with ScriptedJudgeServer(lambda req, i: Reply("yes")) as server:
        rerun = start_run_in_small_chunks(
            landing, warehouse, config, {**env, "CITEGATE_JUDGE_BASE_URL": server.base_url}
        )
        out, _ = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, out[-3000:]
        assert server.incomplete_requests == 0
        second = [r["messages"][0]["content"] for r in server.requests]
    with connect(warehouse, read_only=True) as con:
        [(judged, distinct, errors)] = con.sql(
            "select count(*), count(distinct citation_id), count(*) filter (where verdict = 'error') "
            "from support_verdicts"
        ).fetchall()
        [(n_cache,)] = con.sql("select count(*) from judge_cache").fetchall()
    assert judged == distinct and errors == 0
    # the restart asked exactly the pairs that were not stored before the kill, none of the stored ones
    assert len(second) == n_cache - len(cached)
    assert not {pair_key(content) for content in second} & cached


def pair_key(content: str) -> str:
    """sha256(passage) || sha256(claim) of a request, as judge_cache stores them."""
    import hashlib

    from citegate_assets.lib.support.judge.prompt import TEMPLATE_V1

    head, rest = TEMPLATE_V1.split("{passage_text}")
    middle, tail = rest.split("{claim_sentence}")
    passage, claim = content[len(head) : len(content) - len(tail)].split(middle)
    return hashlib.sha256(passage.encode()).hexdigest() + hashlib.sha256(claim.encode()).hexdigest()


RUN_FACTS = ["latency_ms", "cache_hit", "cost_usd", "prompt_tokens", "completion_tokens", "attempts"]


def published_state(published, lake) -> dict:
    """What readers see: the published file's bytes, the version of each of the lake's Delta tables, and every
    table's rows as it reads them (left out: write times, and what a judge call cost and took, which are the facts
    of the run that made it)."""
    import hashlib

    state = {
        "published_sha256": hashlib.sha256(published.read_bytes()).hexdigest(),
        "lake": lake_versions(lake),
    }
    with connect(published, read_only=True) as con:
        for (table,) in con.sql(
            "select table_name from duckdb_tables() union select view_name from duckdb_views() where not internal"
        ).fetchall():
            columns = [
                c
                for (c,) in con.execute(
                    "select column_name from duckdb_columns() where table_name = $t "
                    "and data_type not like 'TIMESTAMP%' and not list_contains($run_facts, column_name)",
                    {"t": table, "run_facts": RUN_FACTS},
                ).fetchall()
            ]
            state[table] = con.sql(
                f'select {", ".join(f"{chr(34)}{c}{chr(34)}" for c in columns)} from "{table}" order by all'
            ).fetchall()
    return state


def by_content(req: dict, i: int) -> Reply:
    """The same answer for the same pair whatever the order calls arrive in."""
    return Reply("yes" if len(req["messages"][0]["content"]) % 3 else "partial")


def two_judged_days(tmp_path, dagster_home, requests: int, seed: int, concurrency: int) -> tuple:
    """Two generated days, the judge on every citation: (landing, config, warehouse, published, lake, env); the
    judge's URL is the caller's to add to env."""
    landing = tmp_path / "landing"
    generate_logs(landing, days=2, requests_per_day=requests, seed=seed, malformed=False, start_date="2026-11-02")
    config = tmp_path / "c.toml"
    config.write_text(f"[surfaces.default]\nstakes = 'high'\n[judge]\nconcurrency = {concurrency}\nmax_retries = 0\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "CITEGATE_JUDGE_MODEL": "kill-judge",
        "CITEGATE_LABELS": str(tmp_path / "no-labels"),
        "CITEGATE_REVIEWS": str(tmp_path / "reviews"),
    }
    return landing, config, tmp_path / "w.duckdb", tmp_path / "w.published.duckdb", tmp_path / "w.lake", env


def test_a_killed_rerun_of_a_day_leaves_the_previous_state_and_a_rerun_changes_nothing(tmp_path, dagster_home):
    """A day partition's run killed mid-way (after its provenance step, in its judging) leaves what readers see
    exactly as it was: the published file, the lake's table versions, every table's rows. Run again to the end, the
    day's re-run changes no row readers see."""
    landing, config, warehouse, published, lake, env = two_judged_days(tmp_path, dagster_home, 80, 12, 4)
    with ScriptedJudgeServer(by_content) as server:
        env["CITEGATE_JUDGE_BASE_URL"] = server.base_url
        first = start_run(landing, warehouse, config, env)
        out, _ = first.communicate(timeout=300)
        assert first.returncode == 0, out[-3000:]
        judged_once = len(server.requests)
    before = published_state(published, lake)
    assert before["provenance_results"] and before["support_verdicts"]

    # the re-run of day 2 against a judge that answers slowly: killed once it is judging (provenance done)
    day2 = ["--start", "2026-11-03", "--end", "2026-11-03"]
    with ScriptedJudgeServer(lambda req, i: Reply("yes", delay_s=5)) as slow:
        with connect(warehouse) as con:  # forget day 2's cached answers, so the re-run has to call the judge
            con.execute("delete from judge_cache")
        proc = start_run(landing, warehouse, config, {**env, "CITEGATE_JUDGE_BASE_URL": slow.base_url}, *day2)
        deadline = time.monotonic() + 240
        while not slow.requests and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert slow.requests, "the re-run never reached the judge"
    assert published_state(published, lake) == before  # nothing readers see has moved

    with ScriptedJudgeServer(by_content) as server:
        rerun = start_run(landing, warehouse, config, {**env, "CITEGATE_JUDGE_BASE_URL": server.base_url}, *day2)
        out, _ = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, out[-3000:]
        assert 0 < len(server.requests) <= judged_once
    after = published_state(published, lake)
    # judge_cache: emptied by this test to make the re-run call the judge; prompt_count_history: a row per run;
    # metric_week_inputs: the fingerprint of the week's latest writes, which a re-run moves; the lake's versions: a
    # re-run day is a new version of its tables
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


# -- worker processes exit with the process that started them, however it dies ------------------------------------

GONE_WITHIN_S = 60.0  # a liveness bound, not a speed one: a worker should be gone in about a second


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """(state, parent pid, CPU ticks used, start time) of a process; None when it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[19])


def pool_processes(root: int) -> dict[int, int]:
    """pid -> start time of every multiprocessing process (a pool's worker, its resource tracker) under root."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := proc_stat(int(entry))) is not None:
            parents.setdefault(stat[1], []).append(int(entry))
    found, todo = {}, [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            todo.append(child)
            try:
                cmdline = open(f"/proc/{child}/cmdline", "rb").read()
            except OSError:
                continue
            stat = proc_stat(child)
            if b"multiprocessing" in cmdline and stat is not None:
                found[child] = stat[3]
    return found


def workers_of(processes: dict[int, int]) -> list[int]:
    return [pid for pid in processes if b"spawn_main" in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""


def still_alive(processes: dict[int, int]) -> list[int]:
    """The ones still running (a zombie has exited; a pid with another start time is another process)."""
    alive = []
    for pid, started in processes.items():
        stat = proc_stat(pid)
        if stat is not None and stat[0] not in "ZX" and stat[3] == started:
            alive.append(pid)
    return alive


def wait_for(probe, limit_s: float = 240.0):
    deadline = time.monotonic() + limit_s
    while not (found := probe()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def kill_and_check(proc: subprocess.Popen, processes: dict[int, int]) -> list[int]:
    """kill -9 the process, then the pool processes still running GONE_WITHIN_S later (killed after the check)."""
    try:
        assert proc.poll() is None, "the run ended before it was killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + GONE_WITHIN_S
        while still_alive(processes) and time.monotonic() < deadline:
            time.sleep(0.1)
        return still_alive(processes)
    finally:
        for pid in still_alive(processes):
            os.kill(pid, signal.SIGKILL)


def drain(proc: subprocess.Popen, lines: list[str]) -> None:
    """Read the process's output in a thread, so that it never blocks on a full pipe."""
    import threading

    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()


def test_a_killed_run_leaves_no_offline_judge_worker(tmp_path, dagster_home):
    landing = tmp_path / "landing"
    generate_logs(landing, days=1, requests_per_day=700, seed=4, malformed=False)  # 1,578 judged citations
    config = tmp_path / "c.toml"
    config.write_text("[surfaces.default]\nstakes = 'high'\n")  # no endpoint: the offline judge, in 2 processes
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "CITEGATE_LABELS": str(tmp_path / "no-labels")}
    proc = start_run(landing, tmp_path / "w.duckdb", config, env, "--workers", "2")
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if "support_verdicts - judging" in line:
            break
    drain(proc, seen)
    processes = wait_for(lambda: (found := pool_processes(proc.pid)) and len(workers_of(found)) >= 2 and found)
    assert len(workers_of(processes)) == 2, "".join(seen[-20:])
    assert kill_and_check(proc, processes) == []


INGEST_WITH_WORKERS = (
    "import sys\n"
    "from citegate_assets.lib.ingest import workers as ingest_workers\n"
    "ingest_workers.SPAWN_AFTER_BYTES = 0  # parse in the workers from the first batch\n"
    "from citegate_assets.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_a_killed_run_leaves_no_ingest_parse_worker(tmp_path, dagster_home):
    landing = tmp_path / "landing"
    generate_logs(landing, days=1, requests_per_day=2600, seed=9, prompt_kb=1, malformed=False)
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    cmd = [sys.executable, "-c", INGEST_WITH_WORKERS, "run", "--logs", str(landing)]
    cmd += ["--warehouse", str(tmp_path / "w.duckdb"), "--workers", "2"]
    proc = subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    drain(proc, seen)
    processes = wait_for(lambda: (found := pool_processes(proc.pid)) and len(workers_of(found)) >= 2 and found)
    assert not any("provenance:" in line for line in seen), "killed after ingest, not during it"
    assert len(workers_of(processes)) == 2, "".join(seen[-20:])
    assert kill_and_check(proc, processes) == []


def test_a_killed_night_leaves_no_day_process(tmp_path, dagster_home):
    landing = tmp_path / "landing"
    generate_logs(landing, days=2, requests_per_day=20, seed=3, malformed=False)  # two days: the day runs' pool
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    proc = start_run(landing, tmp_path / "w.duckdb", None, env, "--workers", "2")
    seen: list[str] = []
    drain(proc, seen)
    processes = wait_for(lambda: (found := pool_processes(proc.pid)) and len(workers_of(found)) >= 2 and found)
    assert len(workers_of(processes)) == 2, "".join(seen[-20:])
    assert kill_and_check(proc, processes) == []


POOL_THEN_WAIT = """
import re, sys, threading, time
from citegate_assets.lib.core.processes import spawned_pool

def start():
    pool = spawned_pool(2)
    if sys.argv[1] == "busy":  # in C code that holds the GIL for hours: no Python thread of the worker runs
        for _ in range(2):
            pool.submit(re.match, r"(a+)+$", "a" * 64 + "b")
    else:
        for _ in range(2):
            pool.submit(time.sleep, 3600)
    return pool

if sys.argv[2] == "main":
    pool = start()
else:  # made on a thread that then ends: no parent-death signal (it would fire then), the watchdog alone
    pools = []
    spawner = threading.Thread(target=lambda: pools.append(start()))
    spawner.start()
    spawner.join()
print("started", flush=True)
time.sleep(3600)
"""


@pytest.mark.parametrize(
    ("work", "thread"),
    [("busy", "main"), ("idle", "main"), ("idle", "other")],
)
def test_pool_workers_die_with_their_parent(work, thread):
    proc = subprocess.Popen(
        [sys.executable, "-c", POOL_THEN_WAIT, work, thread],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    processes = wait_for(lambda: (found := pool_processes(proc.pid)) and len(workers_of(found)) >= 2 and found, 120)
    if work == "busy":  # both workers inside the regex: past their start-up (about 1 s of CPU)
        ticks = os.sysconf("SC_CLK_TCK")
        assert wait_for(lambda: all((proc_stat(p) or ("", 0, 0, 0))[2] > 3 * ticks for p in workers_of(processes)))
    assert len(workers_of(processes)) == 2
    if thread == "other":  # the thread that spawned them has ended: they live on while their parent does
        time.sleep(2)
        assert len(still_alive(processes)) == len(processes)
    assert kill_and_check(proc, processes) == []
