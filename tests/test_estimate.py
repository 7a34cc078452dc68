"""`citegate estimate`: counts what a run would judge under the config's sampling policy, what is cached, and the
tokens and cost per judge model and mode, from the published copy, without calling the judge (a real server on
127.0.0.1 stands by and must receive nothing); then a real run through that server makes exactly the estimated
number of support calls. selected_pairs reads the passages as the support gate does and gives, row for row, what
the bucketed join it replaced gave (kept below as the reference), text removed or not."""

from __future__ import annotations

import hashlib
import math
import re
from datetime import date, timedelta

import polars as pl
import pytest

from citegate_assets.cli import main
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.estimate import (
    CHARS_PER_TOKEN,
    MESSAGE_TOKENS,
    PAIR_SCHEMA,
    estimate,
    prompt_tokens,
    render,
    selected_pairs,
)
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.provenance import passages as passages_module
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.retention.drop_text import drop_text
from citegate_assets.lib.storage.warehouse import connect, ensure_schema, transaction
from citegate_assets.lib.support.judge.prompt import render_prompt
from citegate_assets.lib.support.policies import registered_policies
from citegate_assets.lib.support.sampling import SALT, sample_key, select_sample
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


def _copy(published, tmp_path):
    """A copy of the module's warehouse, its published copy and landing, for a test that runs again."""
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(published, root)
    return root


def _judge_x_at(server: ScriptedJudgeServer, root, monkeypatch) -> None:
    """The run and the estimate use judge-x at the test's server, the copy's Dagster instance."""
    monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-x")
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))


def _run(root):
    return run_range(PLAN, landing=root / "landing", warehouse=root / "w.duckdb", config_file=root / "citegate.toml")


def test_a_run_makes_the_estimated_number_of_calls(published, monkeypatch, capsys, tmp_path):
    """The estimate for judge-x, then a real run with judge-x: its support calls are the estimated calls."""
    root = _copy(published, tmp_path)
    with ScriptedJudgeServer(lambda r, i: Reply("yes")) as server:
        _judge_x_at(server, root, monkeypatch)
        calls = int(_row(_estimate(root, monkeypatch, capsys), "judge-x", "online *")[4].replace(",", ""))
        assert _run(root).success
        after = _row(_estimate(root, monkeypatch, capsys), "judge-x", "online *")
    with connect(root / "w.duckdb", read_only=True) as con:
        [(fresh,)] = con.sql("select count(*) from support_verdicts where not cache_hit").fetchall()
    assert fresh == calls
    assert int(after[4]) == 0 and int(after[3].replace(",", "")) == calls  # all cached now


def test_best_evidence_makes_at_most_the_estimated_calls_and_exactly_them_when_every_citation_fails(
    published, monkeypatch, capsys, tmp_path
):
    """best_evidence judges other passages of each support failure: the estimate's `best_evidence (max)` row counts
    them as if every judged citation failed. A real run whose judge answers `no` to everything (every judged
    citation fails) makes exactly that many calls beyond the support gate's."""
    root = _copy(published, tmp_path)
    with ScriptedJudgeServer(lambda r, i: Reply("no")) as server:
        _judge_x_at(server, root, monkeypatch)
        out = _estimate(root, monkeypatch, capsys)
        support_calls = int(_row(out, "judge-x", "online *")[4].replace(",", ""))
        evidence = _row(out, "judge-x", "best_evidence (max)")
        evidence_calls = int(evidence[4].replace(",", ""))
        assert server.requests == []  # the estimate called nothing
        assert _run(root).success
        received = len(server.requests)
        after = _row(_estimate(root, monkeypatch, capsys), "judge-x", "best_evidence (max)")
    with connect(root / "w.duckdb", read_only=True) as con:
        [(fresh,)] = con.sql("select count(*) from support_verdicts where not cache_hit").fetchall()
        [(failures, with_candidates)] = con.sql(
            "select count(*), count(*) filter (where len(candidates) > 0) from best_evidence where assessed"
        ).fetchall()
    assert fresh == support_calls
    assert evidence_calls > 0 and with_candidates > 0 and failures > 0
    assert received - fresh == evidence_calls  # best_evidence's own calls: the estimate's upper bound, met
    # priced online: judge-x's input and output prices on the row's tokens
    tokens_in, tokens_out = int(evidence[5].replace(",", "")), int(evidence[6].replace(",", ""))
    assert float(evidence[7]) == pytest.approx(round((tokens_in * 2.0 + tokens_out * 8.0) / 1e6, 4))
    assert int(after[4]) == 0  # all in judge_cache now


def test_in_a_cascade_the_estimate_counts_only_what_the_screen_leaves_and_a_run_makes_those_calls(
    published, monkeypatch, capsys, tmp_path
):
    """[judge] mode = "cascade": the estimate runs the screen on the distinct pairs and counts, for judge-x, only
    those it leaves undecided; a real run through the server then makes exactly that many support calls."""
    root = _copy(published, tmp_path)
    config = root / "citegate.toml"
    config.write_text(config.read_text().replace("[judge]\n", "[judge]\nmode = 'cascade'\n"))
    with ScriptedJudgeServer(lambda r, i: Reply("no")) as server:
        _judge_x_at(server, root, monkeypatch)
        out = _estimate(root, monkeypatch, capsys)
        calls = int(_row(out, "judge-x", "online *")[4].replace(",", ""))
        screen = _row(out, "citegate-screen-v1", "screen (cascade)")
        found = re.search(r"the screen decides ([\d,]+) of the ([\d,]+) distinct pairs", out)
        assert found and server.requests == []  # the estimate called nothing
        decided, pairs = (int(g.replace(",", "")) for g in found.groups())
        assert int(screen[2].replace(",", "")) == pairs and 0 < decided < pairs and calls == pairs - decided
        assert _run(root).success
    with connect(root / "w.duckdb", read_only=True) as con:
        [(fresh, by_screen)] = con.sql(
            "select count(*) filter (where decided_by = 'llm' and not cache_hit), "
            "count(*) filter (where decided_by = 'screen') from support_verdicts"
        ).fetchall()
    assert fresh == calls and by_screen > 0


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


# The join selected_pairs ran before it read cited_passages (sql/report/estimate_pairs.sql, since replaced): one
# bucket of requests at a time, each bucket reading every prompt of the range again.
OLD_BUCKETS = 8
OLD_ESTIMATE_PAIRS = """
with pairs as (
    select
        r.citation_id, r.surface,
        sha256(c.claim_normalized) as claim_sha256,
        length(c.claim_normalized) as claim_chars,
        sha256(substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start)) as passage_sha256,
        length(substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start)) as passage_chars
    from provenance_results r
    join citations c on c.citation_id = r.citation_id
    join prompts p on p.request_id = r.request_id and p.day >= $start and p.day < $end
     and hash(p.request_id) % $buckets = $bucket
    join prompt_sections s
        on s.request_id = r.request_id and s.chunk_id = r.chunk_id and s.day >= $start and s.day < $end
       and r.found_start >= s.body_start and r.found_end <= s.body_end
    where r.day >= $start and r.day < $end and r.reason = 'ok' and c.day >= $start and c.day < $end
      and hash(r.request_id) % $buckets = $bucket
    qualify row_number() over (partition by r.citation_id order by s.section_no) = 1
),
keyed as (
    select pairs.*, sp.stakes, sp.sample_rate,
           ('0x' || left(sha256($salt || pairs.citation_id), 13))::ubigint / 4503599627370496.0 as sample_key
    from pairs
    join surface_policies sp on sp.surface = pairs.surface
)
select
    citation_id, surface, stakes, sample_rate,
    case stakes when 'high' then true when 'low' then sample_key < sample_rate else false end as selected,
    passage_sha256, claim_sha256, passage_chars, claim_chars
from keyed
"""


def old_selected_pairs(con, config, start: date, end: date) -> pl.DataFrame:
    """What selected_pairs returned with the old join, sorted by citation_id."""
    params = {"start": start, "end": end, "salt": SALT, "buckets": OLD_BUCKETS}
    with registered_policies(con, config, start, end):
        parts = [con.sql(OLD_ESTIMATE_PAIRS, params={**params, "bucket": b}).pl() for b in range(OLD_BUCKETS)]
    parts = [p.cast(PAIR_SCHEMA) for p in parts if p.height]
    return (pl.concat(parts) if parts else pl.DataFrame(schema=PAIR_SCHEMA)).sort("citation_id")


RUN_START, RUN_DAYS = date(2026, 11, 2), 3
RUN_END = RUN_START + timedelta(days=RUN_DAYS)
DROPPED_DAY = date(2026, 11, 4)
POLICY = {
    "surfaces": {
        "default": {"stakes": "low", "sample_rate": 0.4},
        "billing-assistant": {"stakes": "high"},
        "internal-search": {"stakes": "off"},
    }
}


def test_selected_pairs_are_the_old_joins_rows_text_removed_or_not(tmp_path, monkeypatch):
    """A generated 3-day run, the provenance gate and the support sample applied without dagster; then the text of
    one day removed as retention removes it. The new selected_pairs equals the old bucketed join row for row, in
    every range, and its values are the ones computed independently: the support sample's selection, sha256 and
    length of the passage and claim the support gate reads."""
    landing = tmp_path / "landing"
    generate_logs(landing, days=RUN_DAYS, requests_per_day=60, seed=5, start_date=RUN_START.isoformat())
    config = parse_config(POLICY, None)
    monkeypatch.setattr(passages_module, "PROMPTS_PER_BATCH", 9)  # many batches of prompts
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        ingest_landing(con, landing, config, final=True)
        check_provenance(con, RUN_START, RUN_END)
        with transaction(con):
            select_sample(con, RUN_START, RUN_END, config)
        sample = con.sql("select citation_id, selected from support_sample").pl()
        passages = passages_module.cited_passages(con, RUN_START, RUN_END)
        ranges = [(RUN_START, RUN_END), (date(2026, 11, 3), date(2026, 11, 4)), (date(2026, 11, 9), date(2026, 11, 10))]
        before = {r: (old_selected_pairs(con, config, *r), selected_pairs(con, config, *r)) for r in ranges}
        with transaction(con):
            dropped = drop_text(con, days=[DROPPED_DAY])
        after = {r: (old_selected_pairs(con, config, *r), selected_pairs(con, config, *r)) for r in ranges}
        lexical = "citegate-lexical-v3"
        estimated = estimate(con, config, RUN_START, RUN_END, {lexical: True}, lexical)

    whole, _ = before[(RUN_START, RUN_END)]
    assert whole.height > 200 and dropped["prompts"] == 60
    for r, (old, new) in [*before.items(), *after.items()]:
        assert new.schema == PAIR_SCHEMA
        assert new.equals(old), r  # row for row, ordered by citation_id
    assert before[(date(2026, 11, 9), date(2026, 11, 10))][1].is_empty()  # a range without citations

    # the policy of each surface: high -> all, off -> none, low -> the stable hash sample, both ways
    new = before[(RUN_START, RUN_END)][1]
    by_stakes = {s: new.filter(pl.col("stakes") == s) for s in ("high", "low", "off")}
    assert set(by_stakes["high"]["surface"]) == {"billing-assistant"} and by_stakes["high"]["selected"].all()
    assert set(by_stakes["off"]["surface"]) == {"internal-search"} and not by_stakes["off"]["selected"].any()
    low = by_stakes["low"]
    assert low.height > 50 and 0 < low["selected"].sum() < low.height
    assert low["selected"].to_list() == [sample_key(c) < 0.4 for c in low["citation_id"]]
    assert set(low["sample_rate"]) == {0.4}
    # the same selection as the support sample the run stored under the same config
    assert new.select("citation_id", "selected").equals(sample.sort("citation_id"))

    # the hashes and lengths: of the passage and claim the support gate reads (normalized, as the judge gets them)
    def sha(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    assert passages["citation_id"].to_list() == new["citation_id"].to_list()
    assert new["passage_sha256"].to_list() == [sha(p) for p in passages["passage"]]
    assert new["claim_sha256"].to_list() == [sha(c) for c in passages["claim"]]
    assert new["passage_chars"].to_list() == [len(p) for p in passages["passage"]]
    assert new["claim_chars"].to_list() == [len(c) for c in passages["claim"]]

    # retention: the day's citations keep their rows and their policy; the text's hashes and lengths are null (as the
    # old join gave them); the other days' rows are unchanged
    removed = after[(RUN_START, RUN_END)][1]
    dropped_ids = passages.filter(pl.col("day") == DROPPED_DAY)["citation_id"].to_list()
    gone = removed.filter(pl.col("citation_id").is_in(dropped_ids))
    assert removed.height == new.height and gone.height > 0
    text = ["passage_sha256", "claim_sha256", "passage_chars", "claim_chars"]
    assert all(gone[c].null_count() == gone.height for c in text)
    kept = ["citation_id", "surface", "stakes", "sample_rate", "selected"]
    assert gone.select(kept).equals(new.filter(pl.col("citation_id").is_in(dropped_ids)).select(kept))
    assert removed.filter(~pl.col("citation_id").is_in(dropped_ids)).equals(
        new.filter(~pl.col("citation_id").is_in(dropped_ids))
    )
    # `citegate estimate` over a range with that day: its citations are counted apart, never estimated as calls
    assert int(estimated["without_text"]["citations"][0]) == gone.height
    assert int(estimated["surfaces"]["citations"].sum()) == new.height - gone.height
    text_out = render(estimated, RUN_START, RUN_END, lexical, "online")
    assert f"{gone.height:,} of days whose text was removed ([retention] text_days) are not estimated" in text_out
