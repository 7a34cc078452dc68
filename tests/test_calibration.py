"""Calibration math: Wilson interval against known values, false pass rate, gate status."""

import polars as pl
import pytest

from citegate_assets.lib.calibration import confusion, false_pass_summary, gate_status, wilson_interval


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
    rows = {r["scope"]: r for r in false_pass_summary(p, threshold=0.2, min_negatives=30)}
    assert rows["no_or_partial"]["negatives"] == 41  # errors are not judgements; unparseable is one, and not a pass
    assert rows["no_or_partial"]["false_passes"] == 3
    assert rows["no"]["negatives"] == 31 and rows["no"]["false_passes"] == 2
    assert rows["no_or_partial"]["judge_errors"] == 3
    assert rows["no_or_partial"]["wilson_high"] < 0.2 and rows["no_or_partial"]["calibrated"]


def test_not_calibrated_on_too_few_negatives():
    p = pairs([("no", "no")] * 29 + [("yes", "yes")] * 50)
    [main, _] = false_pass_summary(p, threshold=0.5, min_negatives=30)
    assert not main["calibrated"]
    [status] = gate_status([("web", "high")], [main])
    assert status["status"] == "uncalibrated" and "29 negatives < 30" in status["why"]


def test_gate_status():
    good = false_pass_summary(pairs([("no", "no")] * 60 + [("partial", "no")] * 40), threshold=0.1, min_negatives=30)
    bad = false_pass_summary(pairs([("no", "yes")] * 10 + [("no", "no")] * 50), threshold=0.1, min_negatives=30)
    assert [s["status"] for s in gate_status([("a", "high"), ("b", "low"), ("c", "off")], good)] == [
        "enforced",
        "enforced",
        "off",
    ]
    [b] = gate_status([("a", "high")], bad)
    assert b["status"] == "uncalibrated" and "upper bound" in b["why"]
    [none] = gate_status([("a", "high")], [])
    assert none["status"] == "uncalibrated"


def test_confusion_cells():
    m = confusion(pairs([("no", "yes"), ("no", "yes"), ("yes", "yes")]))
    assert m.rows() == [("no", "yes", 2), ("yes", "yes", 1)]
