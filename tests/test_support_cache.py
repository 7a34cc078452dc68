"""The judge cache: a pair judged once is never judged again; an error is never cached."""

from contextlib import contextmanager

import polars as pl

from citegate_assets.lib.storage.warehouse import connect, ensure_schema
from citegate_assets.lib.support.judge.base import JudgeResult
from citegate_assets.lib.support.judging import judge_items


class CountingJudge:
    """A test double for the judge's answers only (the transport is tested against a real server elsewhere)."""

    def __init__(self, model="judge-x", fail=()):
        self.model = model
        self.calls: list[str] = []
        self.fail = set(fail)

    def judge(self, requests, progress=None):
        out = []
        for r in requests:
            self.calls.append(r.claim)
            if r.claim in self.fail:
                out.append(JudgeResult(r.key, "error", "500 after 6 attempts", attempts=6))
            else:
                out.append(
                    JudgeResult(
                        r.key, "yes" if "good" in r.claim else "no", "Yes." if "good" in r.claim else "no", 40, 1, 12.0
                    )
                )
        return out


def items(*claims):
    return pl.DataFrame(
        {"item_id": [f"i{n}" for n in range(len(claims))], "passage": ["P"] * len(claims), "claim": list(claims)}
    )


def make_connect(path):
    @contextmanager
    def _connect():
        with connect(path) as con:
            ensure_schema(con)
            yield con

    return _connect


def test_second_run_makes_no_call(tmp_path):
    c, judge = make_connect(tmp_path / "w.duckdb"), CountingJudge()
    first, facts1 = judge_items(c, items("good one", "bad one"), judge, {"judge-x": {"input": 1.0, "output": 2.0}})
    second, facts2 = judge_items(c, items("good one", "bad one"), judge, {})
    assert judge.calls == ["good one", "bad one"]
    assert facts1["judge_calls"] == 2 and facts2["judge_calls"] == 0
    assert first["verdict"].to_list() == second["verdict"].to_list() == ["yes", "no"]
    assert first["cache_hit"].to_list() == [False, False] and second["cache_hit"].to_list() == [True, True]
    assert first["raw_answer"].to_list() == ["Yes.", "no"]
    assert first["cost_usd"].to_list() == [(40 * 1.0 + 1 * 2.0) / 1e6] * 2
    assert second["attempts"].to_list() == [0, 0]


def test_same_pair_twice_in_one_run_is_one_call(tmp_path):
    judge = CountingJudge()
    result, facts = judge_items(make_connect(tmp_path / "w.duckdb"), items("good", "good"), judge, {})
    assert judge.calls == ["good"] and facts["judge_calls"] == 1
    assert result["cache_hit"].to_list() == [False, True]


def test_errors_are_not_cached_and_retried_next_run(tmp_path):
    c = make_connect(tmp_path / "w.duckdb")
    judge = CountingJudge(fail={"flaky"})
    result, facts = judge_items(c, items("flaky", "good"), judge, {})
    assert result["verdict"].to_list() == ["error", "yes"] and facts["errors"] == 1
    with c() as con:
        assert con.sql("select verdict from judge_cache").fetchall() == [("yes",)]
    judge.fail.clear()
    result, facts = judge_items(c, items("flaky", "good"), judge, {})
    assert judge.calls == ["flaky", "good", "flaky"]
    assert result["verdict"].to_list() == ["no", "yes"]


def test_cache_is_keyed_by_judge_model(tmp_path):
    c = make_connect(tmp_path / "w.duckdb")
    a, b = CountingJudge("model-a"), CountingJudge("model-b")
    judge_items(c, items("good"), a, {})
    judge_items(c, items("good"), b, {})
    assert len(a.calls) == len(b.calls) == 1


class InterleavedJudge(CountingJudge):
    """Before its first chunk returns, another day run (judging `other` in the opposite order) stores its answers,
    as a run side by side would between this run's chunks."""

    def __init__(self, connect, other):
        super().__init__()
        self.connect, self.other, self.other_judge = connect, other, CountingJudge()

    def judge(self, requests, progress=None):
        if self.other is not None:
            other, self.other = self.other, None
            judge_items(self.connect, other, self.other_judge, {}, chunk=2, side_by_side="descending")
        return super().judge(requests, progress)


def test_runs_side_by_side_do_not_pay_twice_for_a_pair_the_other_answered(tmp_path):
    """Day runs side by side (`run --workers N`) judge the pairs they share once: each looks its chunk up again
    before judging it, so what the other stored meanwhile is a cache hit, with the same verdicts."""
    c = make_connect(tmp_path / "w.duckdb")
    mine = items("good a", "bad b", "good c", "bad d", "good e", "bad f")
    theirs = items("good c", "bad d", "good e", "bad f", "good g")  # 4 pairs shared
    judge = InterleavedJudge(c, theirs)
    result, facts = judge_items(c, mine, judge, {}, chunk=2, side_by_side="ascending")
    shared = {"good c", "bad d", "good e", "bad f"}
    both_paid = set(judge.calls) & set(judge.other_judge.calls)
    # this run's first chunk was under way when the other began: at most those two pairs are paid twice
    assert len(both_paid) <= 2 and both_paid <= shared
    assert len(judge.calls) < len(mine) and facts["judge_calls"] == len(judge.calls)
    assert sorted(set(judge.calls) | set(judge.other_judge.calls)) == sorted({*mine["claim"], *theirs["claim"]})
    assert result["verdict"].to_list() == ["yes", "no", "yes", "no", "yes", "no"]
    assert result["cache_hit"].sum() == len(mine) - len(judge.calls)


def test_one_run_alone_judges_every_miss_once_in_either_order(tmp_path):
    for order in ("ascending", "descending", None):
        judge = CountingJudge()
        result, facts = judge_items(
            make_connect(tmp_path / f"{order}.duckdb"),
            items("good a", "bad b", "good a", "bad c"),
            judge,
            {},
            chunk=1,
            side_by_side=order,
        )
        assert sorted(judge.calls) == ["bad b", "bad c", "good a"] and facts["judge_calls"] == 3
        assert result["verdict"].to_list() == ["yes", "no", "yes", "no"]
        assert result["cache_hit"].to_list() == [False, False, True, False]


class ReportingJudge(CountingJudge):
    """Reports its progress as the endpoint judges do: after each request, the last one at the chunk's end."""

    def judge(self, requests, progress=None):
        out = []
        for n, request in enumerate(requests, 1):
            out += super().judge([request])
            if progress:
                progress(n, len(requests))
        return out


def test_progress_reports_each_count_once(tmp_path):
    """The run log's "judge: N/N calls" line comes from these reports: the chunk's end once, not twice."""
    reports = []
    judge_items(
        make_connect(tmp_path / "w.duckdb"),
        items("good 1", "good 2", "bad 3"),
        ReportingJudge(),
        {},
        chunk=2,
        progress=lambda done, total: reports.append((done, total)),
    )
    assert reports == [(1, 3), (2, 3), (3, 3)]
