"""Calibration: the Wilson interval against known values, both error rates (false pass, false fail), the gate
status with what it costs; then end to end: a warehouse written by an old release is upgraded and calibrated
through the real openai client against a judge server on 127.0.0.1, and the report prints both rates."""

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from citegate_assets.lib.calibration.rates import (
    calibration_summary,
    confusion,
    extra_queue_per_week,
    false_fail_summary,
    gate_status,
    wilson_interval,
)
from citegate_assets.lib.report_view import calibration_report
from citegate_assets.lib.storage.warehouse import SCHEMA_VERSION, connect
from citegate_assets.pipeline import run_calibration

from .helpers import write_jsonl
from .judge_server import Reply, ScriptedJudgeServer


@pytest.mark.parametrize(
    "k,n,low,high",
    [
        (0, 30, 0.0, 0.11351),  # the rule-of-thumb case: 0 of 30 still allows ~11%
        (5, 100, 0.02155, 0.11175),
        (10, 10, 0.72246, 1.0),
        (1, 2, 0.09453, 0.90547),
    ],
)
def test_wilson_known_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4)
    assert hi == pytest.approx(high, abs=1e-4)


def test_wilson_empty():
    assert wilson_interval(0, 0) == (None, None)


def pairs(rows):
    return pl.DataFrame(rows, schema=["human_label", "judge_verdict"], orient="row")


def own(summary: list[dict]) -> list[dict]:
    """Calibration rows on own labels pooled over surfaces (the only labels a gate is enforced on)."""
    return [{**row, "label_origin": "own", "surface": None} for row in summary]


def test_false_pass_rate_counts_yes_on_no_or_partial():
    p = pairs(
        [("no", "yes")] * 2
        + [("no", "no")] * 28
        + [("partial", "yes")] * 1
        + [("partial", "partial")] * 9
        + [("yes", "yes")] * 20
        + [("no", "unparseable")] * 1
        + [("no", "error")] * 3
    )
    rows = {r["scope"]: r for r in calibration_summary(p, threshold=0.2, min_negatives=30)}
    assert rows["no_or_partial"]["negatives"] == 41  # errors are not judgements; unparseable is one, and not a pass
    assert rows["no_or_partial"]["false_passes"] == 3
    assert rows["no"]["negatives"] == 31 and rows["no"]["false_passes"] == 2
    assert rows["no_or_partial"]["judge_errors"] == 3
    assert rows["no_or_partial"]["wilson_high"] < 0.2 and rows["no_or_partial"]["calibrated"]


def test_not_calibrated_on_too_few_negatives():
    p = pairs([("no", "no")] * 29 + [("yes", "yes")] * 50)
    [main, _] = calibration_summary(p, threshold=0.5, min_negatives=30)
    assert not main["calibrated"]
    [status] = gate_status([("web", "high")], own([main]))
    assert status["status"] == "uncalibrated" and "29 negatives < 30" in status["why"]


def test_gate_status():
    good = calibration_summary(pairs([("no", "no")] * 60 + [("partial", "no")] * 40), threshold=0.1, min_negatives=30)
    bad = calibration_summary(pairs([("no", "yes")] * 10 + [("no", "no")] * 50), threshold=0.1, min_negatives=30)
    assert [s["status"] for s in gate_status([("a", "high"), ("b", "low"), ("c", "off")], own(good))] == [
        "enforced",
        "enforced",
        "off",
    ]
    [b] = gate_status([("a", "high")], own(bad))
    assert b["status"] == "uncalibrated" and "upper bound" in b["why"]
    [none] = gate_status([("a", "high")], [])
    assert none["status"] == "uncalibrated"


def test_confusion_cells():
    m = confusion(pairs([("no", "yes"), ("no", "yes"), ("yes", "yes")]))
    assert m.rows() == [("no", "yes", 2), ("yes", "yes", 1)]


def test_false_fail_rate_counts_every_answer_but_yes_on_human_yes():
    p = pairs(
        [("yes", "yes")] * 20
        + [("yes", "partial")] * 5
        + [("yes", "no")] * 3
        + [("yes", "unparseable")] * 2  # a failure, queued as judge_unparseable: a false fail
        + [("yes", "error")] * 4  # not a judgement: in neither denominator
        + [("no", "no")] * 30
    )
    ff = false_fail_summary(p, threshold=0.5, min_positives=30)
    assert (ff["positives"], ff["false_fails"]) == (30, 10)
    assert ff["false_fail_rate"] == pytest.approx(1 / 3)
    assert (ff["false_fail_low"], ff["false_fail_high"]) == wilson_interval(10, 30)
    assert ff["too_strict"] is False
    assert false_fail_summary(p, threshold=0.3, min_positives=30)["too_strict"] is True
    assert false_fail_summary(p, threshold=0.3, min_positives=31)["too_strict"] is None  # too few: unknown
    rows = calibration_summary(p, 0.2, 30, false_fail_threshold=0.3, min_positives=30)
    assert [r["scope"] for r in rows] == ["no_or_partial", "no"]
    assert all(r["positives"] == 30 and r["false_fails"] == 10 and r["too_strict"] for r in rows)
    assert rows[0]["judge_errors"] == 4 and rows[0]["negatives"] == 30 and rows[0]["calibrated"]


def test_too_strict_means_strictly_over_the_threshold():
    p = pairs([("yes", "yes")] * 30 + [("yes", "no")] * 10)  # 10 of 40 = 0.25
    assert false_fail_summary(p, threshold=0.25, min_positives=0)["too_strict"] is False
    assert false_fail_summary(p, threshold=0.2499, min_positives=0)["too_strict"] is True
    assert false_fail_summary(pairs([("no", "no")]), threshold=0.5, min_positives=0)["too_strict"] is None


def test_every_enforced_gate_says_what_it_costs_in_false_fails():
    summary = calibration_summary(
        pairs([("no", "no")] * 60 + [("partial", "no")] * 40 + [("yes", "yes")] * 10 + [("yes", "partial")] * 30),
        threshold=0.1,
        min_negatives=30,
        false_fail_threshold=0.5,
        min_positives=30,
    )
    rows = gate_status(
        [("a", "high"), ("b", "low"), ("c", "off"), ("d", "high")], own(summary), {"a": 140.0, "b": 7.0, "x": 1.0}
    )
    by = {r["surface"]: r for r in rows}
    assert [r["status"] for r in rows] == ["enforced", "enforced", "off", "enforced"]
    assert by["a"]["too_strict"] is True and by["a"]["false_fail_rate"] == 0.75
    assert by["a"]["judged_per_week"] == 140.0 and by["a"]["extra_queue_per_week"] == pytest.approx(105.0)
    assert by["b"]["extra_queue_per_week"] == pytest.approx(5.25)
    assert by["d"]["judged_per_week"] == 0.0 and by["d"]["extra_queue_per_week"] == 0.0  # judged nothing
    assert "too_strict" not in by["c"] and "false fail" not in by["c"]["why"]
    assert by["a"]["why"] == (
        "own labels pooled over surfaces (a has 0 own negatives < 30): false pass upper bound 0.037 < 0.1 on 100 "
        "negatives; too strict: false fail rate 0.750 (30 of 40 "
        "human-yes, 95% CI 0.598-0.858) > 0.5; ~105.0 true citations a week queued (140.0 judged a week)"
    )
    for row in rows:
        if row["status"] == "enforced":
            assert row["false_fail_rate"] is not None and "false fail rate 0.750" in row["why"]
    [passed] = gate_status([("a", "high")], own(summary), {"a": 140.0}, {"a": 0.05})
    assert passed["judged_yes_rate"] == 0.05 and passed["why"].endswith(
        "(140.0 judged a week, 5.0% of them passed by the judge)"
    )
    [unsized] = gate_status([("a", "high")], own(summary), None)  # no support verdicts in the warehouse
    assert unsized["judged_per_week"] is None and unsized["extra_queue_per_week"] is None
    assert "no judged citations in the warehouse" in unsized["why"]


def test_a_gate_without_human_yes_labels_says_its_cost_is_unknown():
    summary = calibration_summary(pairs([("no", "no")] * 60), threshold=0.1, min_negatives=30)
    [row] = gate_status([("a", "high")], own(summary), {"a": 70.0})
    assert row["status"] == "enforced" and row["too_strict"] is None and row["false_fail_rate"] is None
    assert "false fail rate unknown: no human-yes labels judged" in row["why"]
    few = calibration_summary(pairs([("no", "no")] * 60 + [("yes", "no")] * 3), threshold=0.1, min_negatives=30)
    [row] = gate_status([("a", "high")], own(few), {"a": 70.0})
    assert row["too_strict"] is None and row["extra_queue_per_week"] == pytest.approx(70.0)
    assert "too few human-yes labels to call it too strict (3 < 30)" in row["why"]


def test_extra_queue_per_week():
    assert extra_queue_per_week(200.0, 0.25) == 50.0
    assert extra_queue_per_week(None, 0.25) is None and extra_queue_per_week(200.0, None) is None


# --- end to end: an old release's warehouse, upgraded, calibrated through a judge server on 127.0.0.1 -----------

FIXTURES = Path(__file__).parent / "fixtures"


def _label_plan() -> list[tuple[str, str, Reply]]:
    """(label id, human label, the judge's reply). Human yes: 8 yes, 8 partial, 8 no, 4 unparseable, 4 errors;
    human no/partial: 60, one judged yes."""
    plan = []
    for i in range(32):
        reply = (Reply("Yes"), Reply("partial"), Reply("no."), Reply("it depends"), Reply(status=503))[min(i // 8, 3)]
        if i >= 28:
            reply = Reply(status=503)
        plan.append((f"y{i}", "yes", reply))
    for i in range(60):
        plan.append((f"n{i}", "partial" if i % 3 == 0 else "no", Reply("yes") if i == 0 else Reply("No")))
    return plan


@pytest.fixture
def old_warehouse(tmp_path, dagster_home, monkeypatch):
    db = tmp_path / "old.duckdb"
    db.write_bytes(gzip.decompress((FIXTURES / "warehouse-8747f80.duckdb.gz").read_bytes()))
    plan = _label_plan()
    (tmp_path / "labels").mkdir()
    write_jsonl(
        tmp_path / "labels" / "l.jsonl",
        [
            {"id": i, "claim": f"Claim {i}.", "passage": f"Passage {i}.", "label": label, "labeller": "t"}
            for i, label, _ in plan
        ],
    )
    config = tmp_path / "citegate.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
        "[surfaces.internal-search]\nstakes = 'off'\n"
        "[judge]\nmax_retries = 0\ntimeout_s = 5\nbreaker_threshold = 100\n"
        "[calibration]\nlabels = 'labels'\nmin_positives = 20\nfalse_fail_threshold = 0.5\n"
    )
    replies = {f"Claim {i}.": reply for i, _, reply in plan}

    def answer(request: dict, index: int) -> Reply:
        content = request["messages"][0]["content"]
        return replies[content.split("CLAIM:\n", 1)[1].split("\n", 1)[0]]

    server = ScriptedJudgeServer(answer).start()
    monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-test")
    monkeypatch.setenv("CITEGATE_JUDGE_API_KEY", "sk-test")
    yield db, config, server, plan
    server.stop()


def test_calibrate_an_old_warehouse_reports_both_errors_and_the_cost_per_surface(old_warehouse):
    db, config, server, plan = old_warehouse
    assert run_calibration(warehouse=db, config_file=config, labels=None).success
    sent = [json.loads(json.dumps(r)) for r in server.requests]
    assert {r["model"] for r in sent} == {"judge-test"}
    claims = sorted(r["messages"][0]["content"].split("CLAIM:\n", 1)[1].split("\n", 1)[0] for r in sent)
    assert claims == sorted(f"Claim {i}." for i, _, _ in plan)  # one call per label: max_retries = 0
    with connect(db, read_only=True) as con:
        assert con.sql("select max(version) from schema_version").fetchall() == [(SCHEMA_VERSION,)]
        cal = con.sql(
            "select scope, negatives, false_passes, calibrated, judge_errors, positives, false_fails, "
            "false_fail_rate, false_fail_low, false_fail_high, false_fail_threshold, min_positives, too_strict "
            "from judge_calibration where judge_model = 'judge-test' order by scope"
        ).fetchall()
        old = con.sql(
            "select count(*), count(positives) from judge_calibration where judge_model = 'citegate-heuristic-v1'"
        ).fetchall()
        gates = {
            r[0]: r[1:]
            for r in con.sql(
                "select surface, status, too_strict, false_fail_rate, judged_per_week, extra_queue_per_week, why, "
                "judged_yes_rate from support_gate_status"
            ).fetchall()
        }
        verdicts = con.sql(
            "select surface, count(*) filter (where verdict <> 'error'), "
            "(select max(day) - min(day) + 1 from support_verdicts), count(*) filter (where verdict = 'yes') "
            "from support_verdicts group by 1"
        ).fetchall()
        uncalibrated = con.sql(
            "select surface, status, labels, next_step from support_gate_status where stakes = 'high'"
        ).fetchall()
        origins = con.sql("select origin, count(*) from hand_labels group by 1").fetchall()
    low, high = wilson_interval(20, 28)
    fails = (28, 20, pytest.approx(20 / 28), pytest.approx(low), pytest.approx(high), 0.5, 20, True)
    assert cal == [
        ("no", 40, 0, True, 4, *fails),
        ("no_or_partial", 60, 1, True, 4, *fails),  # 1 of 60: upper bound 0.089 < 0.1
    ]
    assert old == [(2, 0)]  # the old release's rows stay, not measured for false fails
    assert gates["internal-search"][:5] == ("off", None, None, None, None)
    # files without a sample seed are reference labels: their rates are shown, the gate is never enforced on them
    assert origins == [("reference", len(plan))]
    assert (
        verdicts
        and uncalibrated
        and all(
            (status, labels, step)
            == (
                "uncalibrated (reference labels only)",
                "reference",
                "label about 60 more pairs (citegate label, or the review page's Label tab)",
            )
            for _, status, labels, step in uncalibrated
        )
    )
    for surface, judged, days, yes in verdicts:
        if surface == "internal-search":
            continue
        status, too_strict, rate, per_week, extra, why, yes_rate = gates[surface]
        assert (status, too_strict) == ("uncalibrated (reference labels only)", True)
        assert why.startswith("reference labels only (own negatives 0 < 30): false pass upper bound 0.089 < 0.1")
        assert per_week == pytest.approx(judged * 7 / days) and extra == pytest.approx(per_week * 20 / 28)
        assert yes_rate == pytest.approx(yes / judged)
        assert "too strict: false fail rate 0.714 (20 of 28 human-yes" in why
    text = calibration_report(db)
    assert (
        "judge-test (template v1) on reference labels: recall 28.6% (yes to 8 of 28 human-yes labels), false fail "
        "rate 71.4% "
        f"(95% CI {low:.1%}-{high:.1%}); false pass rate 1.7% (yes to 1 of 60 human no/partial labels" in text
    )
    assert "citegate-heuristic-v1 (template v1) on reference labels: false fail rate not measured" in text
    [ff_row] = [line for line in text.splitlines() if "| false fail |" in line and "judge-test" in line]
    assert "| 28 " in ff_row and "| 20 " in ff_row and "0.7143" in ff_row and "too strict" in ff_row
