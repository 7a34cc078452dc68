"""Judge faults through the real nightly job (run_range → Dagster → OpenAIJudge → a real HTTP server on
127.0.0.1): 429 storms, 5xx bursts, replies slower than the deadline, malformed bodies, connection resets,
the server going away mid-run, and the circuit breaker.

For every fault: the run succeeds, the pairs that could not be judged are `error` rows in support_verdicts
(never a pass, never cached, never queued), and a second run against a healthy server calls it exactly
once per distinct (passage, claim) pair that errored — nothing that was cached is asked again.
"""

from __future__ import annotations

from datetime import date

import polars as pl
import pytest

from citegate_assets.lib.provenance.passages import cited_passages
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.lib.support.judge.prompt import render_prompt
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import scenario_record, write_jsonl
from .judge_server import Answer, Reply, ScriptedJudgeServer

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 2))
DAYS = {"start": date(2026, 11, 2), "end": date(2026, 11, 3)}
RECORDS = 10  # 2 provenance-passing citations each: 20 distinct pairs, plus one record repeating r0's pairs
CONCURRENCY = 4
MAX_RETRIES = 1  # two attempts per pair
ATTEMPTS = MAX_RETRIES + 1


def config_text(timeout_s: float, breaker_threshold: int = 100) -> str:
    return (
        "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
        f"[judge]\nmax_retries = {MAX_RETRIES}\nbackoff_base_s = 0.01\nbackoff_max_s = 0.05\ntimeout_s = {timeout_s}\n"
        f"concurrency = {CONCURRENCY}\nbreaker_threshold = {breaker_threshold}\n"
        "[calibration]\nlabels = 'labels'\n"  # an empty folder: no calibration calls muddle the counts
    )


@pytest.fixture
def setup(tmp_path, landing, dagster_home, monkeypatch):
    records = []
    for n in range(RECORDS + 1):
        record = scenario_record("plain-list", "text", request_id=f"r{n}", logged_at="2026-11-02T10:00:00Z")
        owner = 0 if n == RECORDS else n  # the last record repeats r0's claims: same pairs, judged once
        for i, citation in enumerate(record["citations"]):
            # no digits: a number missing from the passage would queue the citation as numeric_mismatch
            citation["claim"] = f"The statement {chr(97 + owner)}{chr(97 + i)} holds."
        records.append(record)
    write_jsonl(landing / "a.jsonl", records)
    (tmp_path / "labels").mkdir()
    config = tmp_path / "citegate.toml"
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-faults")
    monkeypatch.setenv("CITEGATE_JUDGE_API_KEY", "sk-faults-test")
    servers: list[ScriptedJudgeServer] = []

    def serve(answer) -> ScriptedJudgeServer:
        server = ScriptedJudgeServer(answer).start()
        servers.append(server)
        monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
        return server

    yield tmp_path / "w.duckdb", landing, config, serve
    for server in servers:
        server.stop()


def verdict_rows(warehouse) -> pl.DataFrame:
    """One row per judged citation: its verdict, attempts, cache_hit and the (passage, claim) it was judged on."""
    with connect(warehouse, read_only=True) as con:
        pairs = cited_passages(con, DAYS["start"], DAYS["end"]).select("citation_id", "passage", "claim")
        verdicts = con.sql(
            "select citation_id, verdict, raw_answer, attempts, cache_hit, support_pass from support_verdicts"
        ).pl()
    return verdicts.join(pairs, on="citation_id", how="left")


def cache_rows(warehouse) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.sql("select verdict, count(*) from judge_cache group by 1 order by 1").fetchall()


def queued(warehouse, citation_ids: list[str]) -> int:
    with connect(warehouse, read_only=True) as con:
        con.register("ids", pl.DataFrame({"citation_id": citation_ids}).to_arrow())
        [(n,)] = con.sql("select count(*) from citation_queue join ids using (citation_id)").fetchall()
    return n


def bodies(n: int) -> list[Reply]:
    malformed = [
        b"this is not json",
        b'{"choices": [{"message": {"role": "assistant", "cont',  # cut mid-body
        b'{"id": "x", "object": "chat.completion"}',  # no choices
        b'{"id": "x", "object": "chat.completion", "choices": []}',
        b'{"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "stop"}]}',  # no message
        b"[]",
        b'"yes"',
    ]
    return [Reply(body=malformed[i % len(malformed)]) for i in range(n)]


def _first_calls(n: int, fault) -> Answer:
    """The first n calls fail with `fault(i)`; every later call answers yes."""

    def answer(request: dict, index: int) -> Reply:
        return fault(index) if index < n else Reply("yes")

    return answer


# The first STORM calls fail. The first CONCURRENCY calls are first attempts of different pairs (each
# holds a slot through its retries), so the next call is a retry: at least one pair fails all its attempts.
STORM = CONCURRENCY * ATTEMPTS
FIVE_XX = (500, 502, 503, 504)


def _stop_after(k: int):
    holder = {}

    def answer(request: dict, index: int) -> Reply:
        if index == k:
            holder["server"].stop()  # later calls meet a closed port; this one still gets its answer
        return Reply("yes")

    return answer, holder


SCENARIOS = {
    # id: (first-run answer factory, config timeout, breaker threshold, text every error row shows)
    "429-storm": (
        lambda: _first_calls(STORM, lambda i: Reply(status=429, headers={"Retry-After": "0"})),
        5,
        100,
        "429",
    ),
    "5xx-bursts": (
        lambda: lambda req, i: Reply(status=FIVE_XX[i % 4]) if i < 6 or 14 <= i < 22 else Reply("yes"),
        5,
        100,
        "50",
    ),
    "slower-than-the-deadline": (lambda: _first_calls(STORM, lambda i: Reply("yes", delay_s=3.0)), 0.5, 100, "timeout"),
    "malformed-bodies": (lambda: _first_calls(STORM, lambda i: bodies(STORM)[i]), 5, 100, "malformed response"),
    "connection-resets": (lambda: _first_calls(STORM, lambda i: Reply(reset=True)), 5, 100, "connection error"),
    "breaker-opens": (lambda: lambda req, i: Reply(status=503), 5, 3, ""),
}


@pytest.mark.parametrize("scenario", [*SCENARIOS, "server-stopped-mid-run"])
def test_judge_fault_leaves_error_rows_and_the_next_run_retries_exactly_them(scenario, setup):
    warehouse, landing, config, serve = setup
    if scenario == "server-stopped-mid-run":
        answer, holder = _stop_after(5)
        holder["server"] = faulty = serve(answer)
        timeout, threshold, shows = 5, 100, "connection error"
    else:
        make, timeout, threshold, shows = SCENARIOS[scenario]
        faulty = serve(make())
    config.write_text(config_text(timeout, threshold))

    # --- the faulty night ------------------------------------------------------------------------
    first = run_range(PLAN, landing=landing, warehouse=warehouse, config_file=config)
    assert first.success
    rows = verdict_rows(warehouse)
    assert rows.height == 2 * (RECORDS + 1) and rows["passage"].null_count() == 0
    errors = rows.filter(pl.col("verdict") == "error")
    judged = rows.filter(pl.col("verdict") != "error")
    error_pairs = set(zip(errors["passage"], errors["claim"]))
    assert errors.height > 0, "the fault produced no error"
    assert not errors["support_pass"].any()  # never a pass
    assert set(judged["verdict"]) <= {"yes"}  # everything answered was answered by the script
    assert all(shows in raw for raw in errors["raw_answer"].to_list() if "circuit open" not in raw), errors[
        "raw_answer"
    ].to_list()
    if scenario == "breaker-opens":
        # three pairs spend their attempts; the circuit then opens and the rest fail without a call
        assert judged.height == 0
        assert len(faulty.requests) <= (3 + CONCURRENCY) * ATTEMPTS < 2 * RECORDS
        assert errors.filter(pl.col("raw_answer").str.contains("circuit open")).height > 0
    else:
        assert judged.height > 0, "the fault should not have failed every pair"
        assert set(errors["attempts"]) == {ATTEMPTS}  # retried, then given up
    # errors are never cached and never queued; every answered pair is cached once
    cache = cache_rows(warehouse)
    assert "error" not in dict(cache)
    assert sum(n for _, n in cache) == len(set(zip(judged["passage"], judged["claim"])))
    assert queued(warehouse, errors["citation_id"].to_list()) == 0
    faulty.stop()

    # --- the next night, against a healthy server ------------------------------------------------------
    config.write_text(config_text(5, threshold))  # a generous deadline: the healthy run must not time out
    healthy = serve(lambda req, i: Reply("yes"))
    second = run_range(PLAN, landing=landing, warehouse=warehouse, config_file=config)
    assert second.success
    sent = [b["messages"][0]["content"] for b in healthy.requests]
    assert len(sent) == len(error_pairs)  # one call per distinct errored pair: no retries needed, no cached pair asked
    assert set(sent) == {render_prompt(p, c) for p, c in error_pairs}
    after = verdict_rows(warehouse)
    assert set(after["verdict"]) == {"yes"}
    errored_ids = set(errors["citation_id"])
    # what was cached the first night is a cache hit now (no call); the errored pairs were called again
    assert after.filter(~pl.col("citation_id").is_in(list(errored_ids)))["cache_hit"].all()
    assert after.filter(~pl.col("citation_id").is_in(list(errored_ids)))["attempts"].to_list() == [0] * (
        after.height - len(errored_ids)
    )
    first_calls = after.filter(pl.col("citation_id").is_in(list(errored_ids)) & ~pl.col("cache_hit"))
    assert first_calls.height == len(error_pairs)
    assert cache_rows(warehouse) == [("yes", 2 * RECORDS)]
