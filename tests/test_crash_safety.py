"""kill -9 in the middle of ingestion and in the middle of judging, then run again: no duplicate row,
no lost row, and judge calls already cached are not repeated."""

import os
import signal
import subprocess
import sys
import time

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.warehouse import connect

from .judge_server import Reply, ScriptedJudgeServer

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_run(landing, warehouse, config, env):
    cmd = [sys.executable, "-m", "citegate_assets.cli", "run", "--logs", str(landing), "--warehouse", str(warehouse)]
    if config:
        cmd += ["--config", str(config)]
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


def test_kill_during_judging_keeps_cached_calls(tmp_path, dagster_home):
    landing = tmp_path / "landing"
    generate_logs(landing, days=1, requests_per_day=700, seed=4, malformed=False)
    config = tmp_path / "c.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\n[judge]\nconcurrency = 8\nmax_retries = 0\ntimeout_s = 10\n"
    )
    warehouse = tmp_path / "w.duckdb"
    with ScriptedJudgeServer(lambda req, i: Reply("yes", delay_s=0.01)) as server:
        env = {
            **os.environ,
            "DAGSTER_HOME": str(dagster_home),
            "CITEGATE_JUDGE_BASE_URL": server.base_url,
            "CITEGATE_JUDGE_MODEL": "crash-judge",
            "CITEGATE_LABELS": str(tmp_path / "no-labels"),
        }
        proc = start_run(landing, warehouse, config, env)
        deadline = time.monotonic() + 120
        while len(server.requests) < 1100 and time.monotonic() < deadline:  # past the first written chunk (1024)
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert len(server.requests) >= 1100
    with connect(warehouse, read_only=True) as con:
        cached = {p for (p,) in con.sql("select passage_sha256 || claim_sha256 from judge_cache").fetchall()}
    assert len(cached) > 0  # answers are written chunk by chunk, before the kill
    # the restart talks to a server of its own (the cache key has no URL), so a request of the killed run
    # that its server is still reading can never be counted as the restart's; a cut body is no call anyway
    with ScriptedJudgeServer(lambda req, i: Reply("yes")) as server:
        rerun = start_run(landing, warehouse, config, {**env, "CITEGATE_JUDGE_BASE_URL": server.base_url})
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

    from citegate_assets.lib.judge.prompt import TEMPLATE_V1

    head, rest = TEMPLATE_V1.split("{passage_text}")
    middle, tail = rest.split("{claim_sentence}")
    passage, claim = content[len(head) : len(content) - len(tail)].split(middle)
    return hashlib.sha256(passage.encode()).hexdigest() + hashlib.sha256(claim.encode()).hexdigest()
