"""The judge cascade and `unjudged`, end to end: nightly runs on generated logs through a real OpenAI-compatible
server on 127.0.0.1 (the real openai client, real HTTP), and with no endpoint at all.

Cascade: only the pairs the screen left undecided reach the server (counted there), every verdict records the tier
that decided it, a re-run calls nothing, calibration reports each tier, the run reports the calls and cost saved.
No endpoint: what the screen left undecided is `unjudged`, never a pass, queued as support_unjudged, outside
support_pass_rate and counted apart in weekly_surface_metrics, named in the summary."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.provenance.passages import cited_passages
from citegate_assets.lib.report_view import summarize
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.lib.support.judge.prompt import render_prompt
from citegate_assets.lib.support.judge.screen import screen_verdict
from citegate_assets.pipeline import RunPlan, run_range

from .judge_server import Reply, ScriptedJudgeServer

DAY = date(2026, 11, 2)
PLAN = RunPlan(DAY, DAY)
PROJECT = Path(__file__).resolve().parents[1]
LLM = "judge-llm"


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    root = tmp_path_factory.mktemp("cascade-logs")
    generate_logs(root / "landing", days=1, requests_per_day=40, seed=5, malformed=False, start_date="2026-11-02")
    labels = root / "labels"
    labels.mkdir()
    rows = (PROJECT / "labels" / "demo-labels.jsonl").read_text(encoding="utf-8").splitlines()
    (labels / "demo.jsonl").write_text("\n".join(rows[:80]) + "\n", encoding="utf-8")
    return root


def write_config(root: Path, logs: Path, judge: str, best_evidence_k: int = 2) -> Path:
    """root/citegate.toml: every surface judged, the demo labels of `logs` for calibration."""
    config = root / "citegate.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\n"
        f"[judge]\n{judge}\nmax_retries = 1\nbackoff_base_s = 0.01\ntimeout_s = 5\n"
        f"[judge.prices.{LLM}]\ninput = 1.0\noutput = 2.0\n"
        f"[calibration]\nlabels = '{logs / 'labels'}'\n"
        f"[queue]\nbest_evidence_k = {best_evidence_k}\n",
        encoding="utf-8",
    )
    return config


def rows(warehouse: Path, sql: str) -> list[tuple]:
    with connect(warehouse, read_only=True) as con:
        return con.sql(sql).fetchall()


def support_pairs(warehouse: Path) -> pl.DataFrame:
    """citation_id, passage, claim as the support gate judges them, with the screen's own verdict on each."""
    with connect(warehouse, read_only=True) as con:
        items = cited_passages(con, DAY, date(2026, 11, 3), selected_only=True)
    screened = [screen_verdict(p, c) for p, c in zip(items["passage"], items["claim"])]
    return items.select("citation_id", "passage", "claim").with_columns(screen=pl.Series(screened))


def label_pairs(warehouse: Path) -> list[tuple[str, str, str]]:
    return rows(warehouse, "select passage_normalized, claim_normalized, label from hand_labels")


def run(root: Path, logs: Path, config: Path):
    result = run_range(PLAN, landing=logs / "landing", warehouse=root / "w.duckdb", config_file=config)
    assert result.success
    return result


def materialization(result, key: str) -> dict:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key]
    return {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}


def test_the_cascade_sends_only_what_the_screen_leaves_and_a_rerun_calls_nothing(
    landing, tmp_path, dagster_home, monkeypatch
):
    monkeypatch.delenv("CITEGATE_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("CITEGATE_JUDGE_MODEL", raising=False)
    root = tmp_path / "cascade"
    root.mkdir()
    with ScriptedJudgeServer(lambda req, i: Reply("no")) as server:
        config = write_config(root, landing, f"base_url = '{server.base_url}'\nmodel = '{LLM}'\nmode = 'cascade'", 0)
        result = run(root, landing, config)
        sent = [r["messages"][0]["content"] for r in server.requests]
        warehouse = root / "w.duckdb"
        pairs = support_pairs(warehouse)
        undecided = pairs.filter(pl.col("screen") == "undecided")
        expected = {render_prompt(p, c) for p, c in zip(undecided["passage"], undecided["claim"])}
        expected |= {render_prompt(p, c) for p, c, _ in label_pairs(warehouse) if screen_verdict(p, c) == "undecided"}
        assert pairs.height > 30 and 0 < undecided.height < pairs.height  # the screen decided some, not all
        assert set(sent) == expected and len(sent) == len(expected)  # each undecided pair once, nothing else

        verdicts = pl.DataFrame(
            rows(warehouse, "select citation_id, judge_model, verdict, decided_by, support_pass from support_verdicts"),
            schema=["citation_id", "judge_model", "verdict", "decided_by", "support_pass"],
            orient="row",
        ).join(pairs.select("citation_id", "screen"), on="citation_id")
        by_screen = verdicts.filter(pl.col("screen") != "undecided")
        assert (by_screen["decided_by"] == "screen").all() and (by_screen["judge_model"] == "citegate-screen-v1").all()
        assert (by_screen["verdict"] == by_screen["screen"]).all()
        by_llm = verdicts.filter(pl.col("screen") == "undecided")
        assert (by_llm["decided_by"] == "llm").all() and (by_llm["judge_model"] == LLM).all()
        assert (by_llm["verdict"] == "no").all() and not by_llm["support_pass"].any()
        assert "unjudged" not in verdicts["verdict"].to_list()

        # the run reports the calls and the cost the screen saved
        facts = materialization(result, "support_verdicts")
        decided, to_llm = by_screen.height, by_llm.height
        assert facts["decided_by_screen"] == decided and facts["sent_to_llm"] == to_llm
        assert facts["llm_calls_saved_share"] == pytest.approx(decided / (decided + to_llm))
        [(mean_cost,)] = rows(warehouse, "select avg(cost_usd) from support_verdicts where decided_by = 'llm'")
        assert mean_cost > 0 and facts["cost_saved_usd"] == pytest.approx(decided * mean_cost)
        assert f"LLM calls saved {decided / (decided + to_llm):.1%}" in summarize(warehouse)

        # calibration per tier: the screen on every label, the LLM on what it left, the cascade combined
        labels = label_pairs(warehouse)
        left = [(p, c, h) for p, c, h in labels if screen_verdict(p, c) == "undecided"]
        tiers = {
            t: (n, decided_n, fp, ff, said_no)
            for t, n, decided_n, fp, ff, said_no in rows(
                warehouse,
                "select tier, labels, decided, false_passes, false_fails, said_no_on_yes from judge_calibration "
                f"where scope = 'no_or_partial' and judge_model = 'citegate-screen-v1 > {LLM}'",
            )
        }
        screen_yes = {(p, c) for p, c, _ in labels if screen_verdict(p, c) == "yes"}
        neg = [(p, c) for p, c, h in labels if h != "yes"]
        pos = [(p, c) for p, c, h in labels if h == "yes"]
        assert tiers["screen"] == (
            len(labels),
            len(labels) - len(left),
            sum(pair in screen_yes for pair in neg),
            sum(pair not in screen_yes for pair in pos),
            sum(screen_verdict(p, c) == "no" for p, c in pos),
        )
        assert tiers["llm"][:2] == (len(left), len(left)) and tiers["llm"][2] == 0  # it said no to every pair
        assert tiers["cascade"][:3] == (len(labels), len(labels), tiers["screen"][2])
        [(gate_model,)] = rows(warehouse, "select distinct judge_model from support_gate_status")
        assert gate_model == f"citegate-screen-v1 > {LLM}"

        before = rows(warehouse, "select citation_id, verdict, decided_by from support_verdicts order by 1")
        calls = len(server.requests)
        run(root, landing, config)
        assert len(server.requests) == calls  # a re-run makes no call
        assert rows(warehouse, "select citation_id, verdict, decided_by from support_verdicts order by 1") == before


def test_with_no_endpoint_what_the_screen_leaves_is_unjudged_never_a_pass(landing, tmp_path, dagster_home, monkeypatch):
    monkeypatch.delenv("CITEGATE_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("CITEGATE_JUDGE_MODEL", raising=False)
    root = tmp_path / "offline"
    root.mkdir()
    run(
        root, landing, write_config(root, landing, "mode = 'cascade'")
    )  # no endpoint: the screen alone, whatever the mode
    warehouse = root / "w.duckdb"
    pairs = support_pairs(warehouse)
    verdicts = pl.DataFrame(
        rows(
            warehouse,
            "select v.citation_id, v.verdict, v.decided_by, v.support_pass, v.raw_answer, v.numeric_ok, "
            "q.reason from support_verdicts v left join citation_queue q using (citation_id)",
        ),
        schema=["citation_id", "verdict", "decided_by", "support_pass", "raw_answer", "numeric_ok", "reason"],
        orient="row",
    ).join(pairs.select("citation_id", "screen"), on="citation_id")
    unjudged = verdicts.filter(pl.col("verdict") == "unjudged")
    assert unjudged.height == pairs.filter(pl.col("screen") == "undecided").height > 0
    assert (unjudged["screen"] == "undecided").all() and unjudged["decided_by"].is_null().all()
    assert not unjudged["support_pass"].any()
    assert unjudged["raw_answer"].str.contains("no LLM judge is configured").all()
    # queued in its own group, unless a numeric mismatch (a failure found) names the entry
    assert unjudged.filter("numeric_ok")["reason"].to_list() == ["support_unjudged"] * unjudged["numeric_ok"].sum()
    assert set(unjudged.filter(~pl.col("numeric_ok"))["reason"].to_list()) <= {"numeric_mismatch"}
    decided = verdicts.filter(pl.col("screen") != "undecided")
    assert (decided["decided_by"] == "screen").all() and (decided["verdict"] == decided["screen"]).all()
    # never cached as an answer: the screen's own `undecided` is, under its model
    assert rows(warehouse, "select count(*) from judge_cache where verdict = 'unjudged'") == [(0,)]
    [(cached_undecided,)] = rows(warehouse, "select count(*) from judge_cache where verdict = 'undecided'")
    assert cached_undecided > 0

    # counted apart in the weekly metrics: neither a support pass nor a support failure
    metrics = {
        (surface, metric): (numerator, denominator)
        for surface, metric, numerator, denominator in rows(
            warehouse,
            "select surface, metric, numerator, denominator from weekly_surface_metrics "
            "where metric in ('support_pass_rate', 'support_unjudged_rate')",
        )
    }
    counts = rows(
        warehouse,
        "select surface, count(*), count(*) filter (where verdict = 'unjudged'), "
        "count(*) filter (where verdict not in ('unjudged', 'error')), "
        "count(*) filter (where support_pass) from support_verdicts group by 1",
    )
    assert counts
    for surface, selected, n_unjudged, judged, passed in counts:
        assert metrics[(surface, "support_unjudged_rate")] == (n_unjudged, selected)
        assert metrics[(surface, "support_pass_rate")] == (passed, judged)
    weights = rows(
        warehouse,
        "select distinct l.numerator_weight from metric_lineage l join support_verdicts v using (citation_id) "
        "where l.metric = 'end_to_end_pass_rate' and v.verdict = 'unjudged'",
    )
    assert weights == [(0.0,)]  # never a pass, not even in part

    # best evidence never rests a cause on a passage no judge decided
    for cited, candidates, cause in rows(warehouse, "select cited_verdict, candidates, cause from best_evidence"):
        full = any(c["verdict"] == "yes" and c["numeric_ok"] for c in candidates)
        open_ = cited == "unjudged" or any(c["verdict"] == "unjudged" for c in candidates)
        if open_ and not full:
            assert cause in ("unknown", "ranking_or_chunking"), (cited, candidates, cause)
        if cited == "unjudged" and not full:
            assert cause == "unknown"
    text = summarize(warehouse)
    assert f"{unjudged.height:,} citation(s) unjudged: citegate-screen-v1 left them undecided" in text


def test_calibration_rows_name_their_tier_and_the_gate_reads_the_screens(landing, tmp_path, dagster_home, monkeypatch):
    """No endpoint: one tier, the screen; its undecided labels are unjudged (not yes), its coverage is what it
    decided, and support_gate_status rests on it."""
    monkeypatch.delenv("CITEGATE_JUDGE_BASE_URL", raising=False)
    root = tmp_path / "calibration"
    root.mkdir()
    run(root, landing, write_config(root, landing, ""))
    warehouse = root / "w.duckdb"
    labels = label_pairs(warehouse)
    verdicts = [screen_verdict(p, c) for p, c, _ in labels]
    [(tier, n, decided, coverage, negatives, false_passes, positives, false_fails)] = rows(
        warehouse,
        "select tier, labels, decided, coverage, negatives, false_passes, positives, false_fails "
        "from judge_calibration where scope = 'no_or_partial'",
    )
    decided_n = sum(v != "undecided" for v in verdicts)
    assert (tier, n, decided) == ("screen", len(labels), decided_n)
    assert coverage == pytest.approx(decided_n / len(labels))
    assert negatives == sum(h != "yes" for _, _, h in labels)
    assert false_passes == sum(v == "yes" and h != "yes" for v, (_, _, h) in zip(verdicts, labels))
    assert false_fails == sum(v != "yes" and h == "yes" for v, (_, _, h) in zip(verdicts, labels)) and positives
    confusion = dict(
        ((h, v), n)
        for h, v, n in rows(warehouse, "select human_label, judge_verdict, n from judge_calibration_confusion")
    )
    assert sum(n for (_, v), n in confusion.items() if v == "unjudged") == len(labels) - decided_n
    assert rows(warehouse, "select distinct judge_model from support_gate_status") == [("citegate-screen-v1",)]
    assert json.loads(json.dumps(rows(warehouse, "select distinct tier from judge_calibration_confusion"))) == [
        ["screen"]
    ]


def test_a_schema_16_warehouse_gains_the_tier_columns_and_keeps_its_rows(tmp_path):
    """Migration 017: support_verdicts.decided_by and judge_calibration's tier columns are added; the rows written
    before keep nulls (an old verdict was the one configured judge's, an old calibration row the judge alone)."""
    from citegate_assets.lib.storage.warehouse import SCHEMA_VERSION, ensure_schema

    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        for table, column in (
            ("support_verdicts", "decided_by"),
            ("judge_calibration", "tier"),
            ("judge_calibration", "decided"),
            ("judge_calibration", "coverage"),
            ("judge_calibration", "said_no_on_yes"),
            ("judge_calibration_confusion", "tier"),
        ):
            con.execute(f"alter table {table} drop column {column}")
        con.execute(
            "insert into support_verdicts values ('c1', 'r1', '2026-11-02', 's', 'm', 'judge-a', 'v1', 'yes', 'yes', "
            "true, true, false, 1.0, 10, 1, 0.001, 1, false, now())"
        )
        con.execute("delete from schema_version")
        con.execute("insert into schema_version values (16, now())")
    with connect(path) as con:
        ensure_schema(con)
        assert con.sql("select max(version) from schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(18,)]
        assert con.sql("select citation_id, verdict, decided_by from support_verdicts").fetchall() == [
            ("c1", "yes", None)
        ]
        columns = {
            c
            for (c,) in con.sql(
                "select column_name from duckdb_columns() where table_name = 'judge_calibration'"
            ).fetchall()
        }
        assert {"tier", "decided", "coverage", "said_no_on_yes"} <= columns
