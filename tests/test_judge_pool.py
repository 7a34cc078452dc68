"""The offline judge and the numeric check split across spawned processes (lib/core/processes.py): the same results
in the same order as in process, a pair that raises is an `error` (never a pass), the work ran in other processes."""

from __future__ import annotations

import os

import pytest

from citegate_assets.lib.config import parse_config
from citegate_assets.lib.core import processes as pool
from citegate_assets.lib.support.judge.base import JudgeRequest, judge_in_process
from citegate_assets.lib.support.judge.factory import make_judge, make_offline_judge
from citegate_assets.lib.support.judge.lexical import LexicalJudge


def judged_by(passage: str, claim: str) -> str:
    """The process that judged the pair (module level: it is pickled into the workers)."""
    if claim == "boom":
        raise ValueError("unreadable pair")
    return str(os.getpid())


def pairs(n: int) -> list[JudgeRequest]:
    return [
        JudgeRequest(
            key=f"k{i}",
            passage=f"The annual fee for plan {i} is {i * 3} dollars, billed in January.",
            claim="boom" if i == 7 else f"Plan {i} costs {i * 3 if i % 2 else i * 4} dollars a year.",
        )
        for i in range(n)
    ]


@pytest.fixture
def small_passes(monkeypatch):
    monkeypatch.setattr(pool, "MIN_ITEMS", 16)
    monkeypatch.setattr(pool, "PIECE", 16)


def test_a_large_pass_runs_in_other_processes_and_keeps_order_and_errors(small_passes):
    requests = pairs(96)
    seen: list[int] = []
    results = judge_in_process(requests, judged_by, lambda done, total: seen.append(done), workers=2)
    assert [r.key for r in results] == [r.key for r in requests]
    assert results[7].verdict == "error" and results[7].raw_answer == "ValueError: unreadable pair"
    pids = {r.verdict for i, r in enumerate(results) if i != 7}
    assert str(os.getpid()) not in pids and 1 <= len(pids) <= 2
    assert seen == sorted(seen) and seen[-1] == 96


def test_a_small_pass_stays_in_process(small_passes):
    results = judge_in_process(pairs(10), judged_by, workers=2)  # under MIN_ITEMS
    assert {r.verdict for i, r in enumerate(results) if i != 7} == {str(os.getpid())}
    assert results[7].verdict == "error"


def test_the_lexical_judge_gives_the_same_verdicts_with_two_workers(small_passes):
    requests = pairs(64)
    one = LexicalJudge(workers=1).judge(requests)
    two = LexicalJudge(workers=2).judge(requests)
    assert [(r.key, r.verdict, r.raw_answer) for r in one] == [(r.key, r.verdict, r.raw_answer) for r in two]
    assert {r.verdict for r in one} <= {"yes", "partial", "no", "error"}


def test_workers_come_from_the_config_and_auto_is_bounded():
    assert pool.worker_count(3) == 3
    assert 1 <= pool.worker_count(0) <= pool.AUTO_MAX
    judge = make_judge(parse_config({"judge": {"workers": 2}}, None).judge, env={})
    assert judge.workers == 2
    assert make_offline_judge("heuristic", 3).workers == 3
    with pytest.raises(ValueError, match="workers"):
        parse_config({"judge": {"workers": -1}}, None)


def test_citegate_run_workers_overrides_both_settings_for_the_run(tmp_path):
    from citegate_assets.cli import main
    from citegate_assets.defs.resources import CitegateConfigResource

    config = tmp_path / "citegate.toml"
    config.write_text("[ingest]\nworkers = 1\n\n[judge]\nworkers = 1\n")
    as_configured = CitegateConfigResource(config_file=str(config)).config()
    assert (as_configured.ingest.workers, as_configured.judge.workers) == (1, 1)
    overridden = CitegateConfigResource(config_file=str(config), workers=3).config()
    assert (overridden.ingest.workers, overridden.judge.workers) == (3, 3)
    with pytest.raises(SystemExit) as refused:
        main(["run", "--workers", "0", "--config", str(config)])
    assert refused.value.code == 2


def test_a_nightly_run_with_two_workers_stores_the_same_verdicts(tmp_path, dagster_home, monkeypatch):
    """A real run whose judging and numeric check are split across spawned processes (the size floor lowered so
    a small day qualifies) stores exactly the verdicts, numeric checks and best evidence of a run in process."""
    from datetime import date

    from citegate_assets.lib.loggen import generate_logs
    from citegate_assets.lib.storage.warehouse import connect
    from citegate_assets.pipeline import RunPlan, run_range

    monkeypatch.setattr(pool, "MIN_ITEMS", 16)
    monkeypatch.setattr(pool, "PIECE", 16)
    monkeypatch.setattr(pool, "_pools", {})  # the run's own pools, to see which it started
    landing = tmp_path / "landing"
    generate_logs(landing, days=1, requests_per_day=40, seed=5, malformed=False, start_date="2026-11-02")
    day = date(2026, 11, 2)
    stored = {}
    for workers in (1, 2):
        root = tmp_path / f"w{workers}"
        root.mkdir()
        config = root / "citegate.toml"
        config.write_text('[surfaces.default]\nstakes = "high"\n')
        result = run_range(
            RunPlan(day, day), landing=landing, warehouse=root / "w.duckdb", config_file=config, workers=workers
        )
        assert result.success
        with connect(root / "w.duckdb", read_only=True) as con:
            stored[workers] = (
                con.sql(
                    "select citation_id, judge_model, verdict, raw_answer from support_verdicts order by 1"
                ).fetchall(),
                con.sql("select * exclude (computed_at) from best_evidence order by all").fetchall(),
                con.sql("select * exclude (checked_at) from numeric_checks order by all").fetchall(),
            )
    started = dict(pool._pools)
    for executor in started.values():
        executor.shutdown()
    assert list(started) == [2]  # only the two-worker run spawned processes
    verdicts, _evidence, numeric = stored[1]
    assert any(not row[-1] for row in numeric)  # a claim number the passage lacks was found
    assert len(verdicts) > 16 and {v for _, _, v, _ in verdicts} <= {"yes", "no", "unjudged"}  # the screen alone
    assert stored[2] == stored[1]


def test_the_numeric_check_over_chunks_and_processes_gives_the_rows_in_order(monkeypatch):
    """numeric_checks runs numeric_piece through lib/core/processes.py map_rows: a chunk of rows at a time (Python
    strings
    for one chunk only), each chunk split across spawned processes. The result is the in-process one, row for row,
    across chunk boundaries (a chunk of 600 rows here, so three chunks and a short last one)."""
    import polars as pl

    from citegate_assets.lib.core import processes
    from citegate_assets.lib.support.numbers import numeric_piece

    monkeypatch.setattr(processes, "ROWS_PER_CHUNK", 600)
    claims = pl.Series([f"It costs ${i} and {i % 7}%." for i in range(1500)])
    passages = pl.Series([f"The price is ${i if i % 3 else i + 1}; rate {i % 7}%." for i in range(1500)])
    expected = numeric_piece(list(zip(claims.to_list(), passages.to_list())))
    assert processes.map_rows(numeric_piece, [claims, passages], 2) == expected
    assert processes.map_rows(numeric_piece, [claims, passages], 1) == expected
    assert sum(1 for _, missing in expected if missing) == 500  # the rows whose price the passage lacks
    assert processes.map_rows(numeric_piece, [claims.head(0), passages.head(0)], 2) == []
