"""`citegate estimate`: counts what a run would judge under the config's sampling policy, what is cached, and the
tokens and cost per judge model and mode, from the published copy, without calling the judge (a real server on
127.0.0.1 stands by and must receive nothing); then a real run through that server makes exactly the estimated
number of support calls."""

from __future__ import annotations

import math
import re
from datetime import date

import pytest

from citegate_assets.cli import main
from citegate_assets.lib.estimate import CHARS_PER_TOKEN, MESSAGE_TOKENS, prompt_tokens
from citegate_assets.lib.judge.prompt import render_prompt
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .judge_server import Reply, ScriptedJudgeServer

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 3))


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """Two days of sample logs, run with judge-a (a real server on 127.0.0.1); the published copy beside the
    warehouse."""
    root = tmp_path_factory.mktemp("estimate")
    landing = root / "landing"
    generate_logs(landing, days=2, requests_per_day=40, seed=3, start_date="2026-11-02", malformed=False)
    config = root / "citegate.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'low'\nsample_rate = 0.5\n"
        "[surfaces.billing-assistant]\nstakes = 'high'\n"
        "[surfaces.internal-search]\nstakes = 'off'\n"
        "[judge]\nmax_tokens = 5\nbatch_discount = 0.5\nmax_retries = 0\ntimeout_s = 5\n"
        "[judge.prices.judge-x]\ninput = 2.0\noutput = 8.0\n"
    )
    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    (root / "dagster_home").mkdir()
    server = ScriptedJudgeServer(lambda r, i: Reply("yes")).start()
    mp.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
    mp.setenv("CITEGATE_JUDGE_MODEL", "judge-a")
    try:
        assert run_range(PLAN, landing=landing, warehouse=root / "w.duckdb", config_file=config).success
    finally:
        mp.undo()
        server.stop()
    return root


def _estimate(root, monkeypatch, capsys, *argv: str) -> str:
    monkeypatch.delenv("CITEGATE_PUBLISHED", raising=False)
    code = main(["estimate", "--warehouse", str(root / "w.duckdb"), "--config", str(root / "citegate.toml"), *argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def _row(out: str, model: str, mode: str) -> list[str]:
    """The cells of one line of the per-model table."""
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"\s{2,}|\|", line) if c.strip()]
        if cells[:2] == [model, mode]:
            return cells
    raise AssertionError(f"no row {model} {mode} in:\n{out}")


def _expected(root) -> dict:
    """What support_verdicts judged, from the warehouse itself: selected citations and distinct prompts."""
    with connect(root / "w.published.duckdb", read_only=True) as con:
        [(judged,)] = con.sql("select count(*) from support_verdicts").fetchall()
        by_surface = dict(con.sql("select surface, count(*) from support_verdicts group by 1").fetchall())
        pairs = con.sql(
            """
            select distinct c.claim_normalized,
                   substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start)
            from support_verdicts v
            join provenance_results r using (citation_id)
            join citations c using (citation_id)
            join prompts p on p.request_id = r.request_id
            join prompt_sections s on s.request_id = r.request_id and s.chunk_id = r.chunk_id
             and r.found_start >= s.body_start and r.found_end <= s.body_end
            """
        ).fetchall()
    tokens = sum(math.ceil(len(render_prompt(p, c)) / CHARS_PER_TOKEN) + MESSAGE_TOKENS for c, p in pairs)
    return {"judged": judged, "by_surface": by_surface, "pairs": len(pairs), "tokens": tokens}


def test_estimate_counts_cached_pairs_tokens_and_cost_without_calling(published, monkeypatch, capsys):
    with ScriptedJudgeServer(lambda r, i: Reply("yes")) as server:
        monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-x")
        out = _estimate(published, monkeypatch, capsys, "--start", "2026-11-02", "--end", "2026-11-03")
        assert server.requests == [] and server.incomplete_requests == 0  # nothing was called
    want = _expected(published)
    assert want["judged"] > 0 and want["pairs"] > 0
    online = _row(out, "judge-x", "online *")
    batch = _row(out, "judge-x", "batch")
    pairs, cached, calls, prompt, completion, cost = online[2:8]
    assert int(pairs.replace(",", "")) == want["pairs"]
    assert int(cached) == 0 and int(calls.replace(",", "")) == want["pairs"]  # nothing judged by judge-x yet
    assert int(prompt.replace(",", "")) == want["tokens"]
    assert int(completion.replace(",", "")) == 5 * want["pairs"]
    expected_cost = (want["tokens"] * 2.0 + 5 * want["pairs"] * 8.0) / 1e6
    assert float(cost) == pytest.approx(expected_cost, abs=1e-4)
    assert float(batch[7]) == pytest.approx(expected_cost * 0.5, abs=1e-4)  # batch_discount
    # per surface: the policy's selection (high: all, off: none), counted as support_verdicts did
    for surface, n in want["by_surface"].items():
        assert re.search(rf"{re.escape(surface)}\s.*\s{n}\s", out), (surface, n, out)
    assert "internal-search" not in want["by_surface"]


def test_the_judge_of_the_last_run_is_fully_cached(published, monkeypatch, capsys):
    monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # never called
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-a")
    out = _estimate(published, monkeypatch, capsys)
    cells = _row(out, "judge-a", "online *")
    want = _expected(published)
    assert int(cells[2]) == want["pairs"] and int(cells[3]) == want["pairs"] and int(cells[4]) == 0
    assert cells[7] == "null"  # judge-a has no price: no cost
    assert _row(out, "judge-x", "online")[3] == "0"  # another priced model: nothing cached for it


def test_a_run_makes_the_estimated_number_of_calls(published, monkeypatch, capsys, tmp_path):
    """The estimate for judge-x, then a real run with judge-x: its support calls are the estimated calls."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(published, root)
    with ScriptedJudgeServer(lambda r, i: Reply("yes")) as server:
        monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-x")
        monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        calls = int(_row(_estimate(root, monkeypatch, capsys), "judge-x", "online *")[4].replace(",", ""))
        assert run_range(
            PLAN, landing=root / "landing", warehouse=root / "w.duckdb", config_file=root / "citegate.toml"
        ).success
        after = _row(_estimate(root, monkeypatch, capsys), "judge-x", "online *")
    with connect(root / "w.duckdb", read_only=True) as con:
        [(fresh,)] = con.sql("select count(*) from support_verdicts where not cache_hit").fetchall()
    assert fresh == calls
    assert int(after[4]) == 0 and int(after[3].replace(",", "")) == calls  # all cached now


def test_estimate_needs_the_published_copy(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CITEGATE_PUBLISHED", raising=False)
    code = main(["estimate", "--warehouse", str(tmp_path / "none.duckdb")])
    assert code == 2 and "no published copy" in capsys.readouterr().err
    assert not (tmp_path / "none.duckdb").exists()  # never the working file


def test_prompt_tokens_formula():
    frame = len(render_prompt("", ""))
    assert prompt_tokens(0, 0) == math.ceil(frame / 4) + MESSAGE_TOKENS
    assert prompt_tokens(400, 0) - prompt_tokens(0, 0) == 100


def test_the_secondary_judges_calls_are_estimated_and_a_run_makes_them(published, monkeypatch, capsys, tmp_path):
    """[judge.secondary] on its own server: the estimate's `secondary` row, then a real run; the secondary server
    receives exactly the estimated calls, with the estimated prompt tokens (the primary judge-a is all cached)."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(published, root)
    with (
        ScriptedJudgeServer(lambda r, i: Reply("yes")) as primary,
        ScriptedJudgeServer(lambda r, i: Reply("no")) as secondary,
    ):
        config = root / "citegate.toml"
        config.write_text(
            config.read_text()
            + "[judge.prices.judge-s]\ninput = 4.0\noutput = 16.0\n"
            + f"[judge.secondary]\nbase_url = '{secondary.base_url}'\nmodel = 'judge-s'\nsample_rate = 0.3\n"
        )
        monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", primary.base_url)
        monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-a")
        monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
        out = _estimate(root, monkeypatch, capsys)
        assert primary.requests == [] and secondary.requests == []  # the estimate calls nothing
        row = _row(out, "judge-s", "secondary")
        pairs, cached, calls, prompt, completion, cost = (c.replace(",", "") for c in row[2:8])
        assert int(cached) == 0 and int(calls) == int(pairs) > 0
        assert "secondary = [judge.secondary]" in out
        assert run_range(PLAN, landing=root / "landing", warehouse=root / "w.duckdb", config_file=config).success
        received = list(secondary.requests)
        assert primary.requests == []  # judge-a's answers were cached by the fixture's run
    assert len(received) == int(calls)
    assert {r["model"] for r in received} == {"judge-s"}
    tokens = sum(math.ceil(len(r["messages"][0]["content"]) / CHARS_PER_TOKEN) + MESSAGE_TOKENS for r in received)
    assert int(prompt) == tokens and int(completion) == 5 * len(received)
    assert float(cost) == pytest.approx((tokens * 4.0 + 5 * len(received) * 16.0) / 1e6, abs=1e-4)
    with connect(root / "w.duckdb", read_only=True) as con:
        [(sampled, models)] = con.sql(
            "select count(*), string_agg(distinct secondary_model) from judge_agreement"
        ).fetchall()
    assert models == "judge-s" and sampled >= len(received)  # the same pair twice is one call
