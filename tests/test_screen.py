"""The screen citegate-screen-v1 (lib/support/judge/screen.py): yes, no or undecided, failing closed.

Hand-written pairs; properties (an added unsupported clause, a quantity the passage lacks); the held-out figures
docs/support-gate.md states, recomputed from the converted test splits; the shipped weights against a fresh training."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegate_assets.lib.calibration.rates import wilson_interval
from citegate_assets.lib.config import JudgeConfig
from citegate_assets.lib.report_view import rate_cell
from citegate_assets.lib.support.judge.base import JudgeRequest
from citegate_assets.lib.support.judge.factory import estimated_cost, make_judge, make_offline_judge
from citegate_assets.lib.support.judge.screen import (
    HELD_OUT,
    SCREEN_MODEL,
    SCREEN_VERDICTS,
    HeldOutFigures,
    ScreenJudge,
    screen_verdict,
)
from tests.test_heuristic_judge import NEGATIONS, NUMBER_MISMATCHES, STRETCHED

PROJECT = Path(__file__).resolve().parents[1]
SUPPORT_GATE = PROJECT / "docs" / "support-gate.md"  # the page that states the screen's figures

PLANS = (
    "The Pro plan costs $49 per month and includes priority support. "
    "Refunds are available within 30 days of purchase for annual subscriptions only. "
    "The Basic plan does not include phone support."
)


def load_script(name: str):
    sys.path.insert(0, str(PROJECT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, PROJECT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "claim,expected",
    [
        ("The Pro plan costs $49 per month and includes priority support.", "yes"),  # verbatim
        ("The Pro plan includes priority support.", "yes"),  # a verbatim part
        ("The Pro plan costs $49 per month and includes priority support [1].", "yes"),  # a citation marker
        ("Our headquarters moved to Lisbon after the merger with a Danish shipping company.", "no"),  # words absent
    ],
)
def test_clear_cases(claim, expected):
    assert screen_verdict(PLANS, claim) == expected


@pytest.mark.parametrize(
    "claim",
    [
        "Refunds are available within 30 days of purchase.",  # drops "for annual subscriptions only"
        "The Pro plan costs $59 per month and includes priority support.",  # a changed number
        "The Pro plan costs up to $49 per month.",  # a changed bound
        "The Basic plan includes phone support.",  # the negation dropped
        "The Pro plan does not include priority support.",  # a negation added
        "The Pro plan costs $49 per month and includes priority support and a dedicated account manager.",  # partial
    ],
)
def test_what_the_passage_does_not_say_is_never_yes(claim):
    assert screen_verdict(PLANS, claim) != "yes"


@pytest.mark.parametrize("passage,claim", NUMBER_MISMATCHES + NEGATIONS + STRETCHED)
def test_the_heuristics_traps_are_never_yes(passage, claim):
    assert screen_verdict(passage, claim) != "yes"


def test_it_never_says_partial_and_thin_claims_are_undecided():
    assert screen_verdict(PLANS, "49.") == "undecided"
    assert screen_verdict(PLANS, "") == "undecided"
    rows = [json.loads(line) for line in (PROJECT / "labels" / "demo-labels.jsonl").open(encoding="utf-8")]
    verdicts = {screen_verdict(r["passage"], r["claim"]) for r in rows}
    assert verdicts == set(SCREEN_VERDICTS)


# --------------------------------------------------------------------------------------------- properties

WORDS = st.sampled_from(
    "river valley engineer contract harbour licence museum orchard turbine glacier ledger violin canal".split()
)
OTHER_WORDS = st.sampled_from("zeppelin quartz walrus saffron trombone kayak lantern mosaic".split())
SENTENCES = [
    "The Pro plan costs $49 per month and includes priority support.",
    "The Pro plan includes priority support.",
    "Refunds are available within 30 days of purchase for annual subscriptions only.",
    "The museum opened the orchard to visitors in 1998.",
    "Marie Curie conducted pioneering research on radioactivity.",
]
PASSAGE_WITH_MUSEUM = (
    PLANS
    + " The museum opened the orchard to visitors in 1998. "
    + ("Marie Curie conducted pioneering research on radioactivity.")
)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(SENTENCES), st.lists(OTHER_WORDS, min_size=1, max_size=3), st.sampled_from(["and", "with"]))
def test_an_unsupported_clause_never_turns_an_answer_into_yes(sentence, extra, joiner):
    """Words the passage lacks, added to any claim: the verdict may fall to undecided or no, never rise to yes."""
    base = screen_verdict(PASSAGE_WITH_MUSEUM, sentence)
    stretched = sentence.rstrip(".") + f" {joiner} {' '.join(extra)}."
    after = screen_verdict(PASSAGE_WITH_MUSEUM, stretched)
    assert after != "yes"
    assert base != "yes" or after in ("undecided", "no")


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(SENTENCES), st.integers(min_value=2, max_value=999_999), st.sampled_from(["%", "", " days"]))
def test_a_claim_quantity_absent_from_the_passage_is_never_yes(sentence, number, unit):
    if str(number) in PASSAGE_WITH_MUSEUM:
        number += 1_000_000
    claim = sentence.rstrip(".") + f" for {number}{unit}."
    assert screen_verdict(PASSAGE_WITH_MUSEUM, claim) != "yes"


@settings(max_examples=60, deadline=None)
@given(st.lists(WORDS, min_size=3, max_size=8, unique=True), st.lists(OTHER_WORDS, min_size=3, max_size=6, unique=True))
def test_a_claim_of_absent_words_is_no_and_never_yes(present, absent):
    passage = "The " + " ".join(present) + " was recorded in the ledger."
    assert screen_verdict(passage, "The " + " ".join(absent) + " arrived.") == "no"


# -------------------------------------------------------------------------------------- the Judge protocol


def test_the_screen_is_the_default_offline_judge_and_the_others_warn(caplog):
    judge = make_judge(JudgeConfig(), env={})
    assert isinstance(judge, ScreenJudge) and judge.model == SCREEN_MODEL == "citegate-screen-v1"
    assert estimated_cost({}, SCREEN_MODEL, None, None) == 0.0
    with caplog.at_level(logging.WARNING):
        lexical = make_judge(JudgeConfig(offline="lexical"), env={})
    assert lexical.model == "citegate-lexical-v3"
    assert "does not fail closed" in caplog.text
    assert make_offline_judge("screen", 3).workers == 3


def test_the_judge_gives_the_same_verdicts_in_order_with_two_processes():
    rows = [json.loads(line) for line in (PROJECT / "labels" / "demo-labels.jsonl").open(encoding="utf-8")]
    requests = [JudgeRequest(key=r["id"], passage=r["passage"], claim=r["claim"]) for r in rows]
    one = ScreenJudge(workers=1).judge(requests)
    two = ScreenJudge(workers=2).judge(requests)
    assert [(r.key, r.verdict) for r in one] == [(r.key, r.verdict) for r in two]
    assert [r.verdict for r in one] == [screen_verdict(r["passage"], r["claim"]) for r in rows]


# ------------------------------------------------------------------------ the figures docs/support-gate.md states


def labels_file(output: str, tmp_path: Path) -> Path:
    """The converted split: in labels/ if converted there, else converted now from the local source copies."""
    path = PROJECT / output
    if path.exists():
        return path
    convert = load_script("convert_labels")
    source = convert.SPLITS[output][0]
    if not (convert.DEFAULT_GIT[source] / "HEAD").exists():
        pytest.skip(f"{output} is not converted and no copy of its source repository is here")
    return convert.convert(output, convert.DEFAULT_GIT, into=tmp_path)


@pytest.mark.parametrize(
    "name,output",
    [
        ("WiCE test", "labels/wice/test-labels.jsonl"),
        ("AttributionBench test", "labels/attributionbench/test-labels.jsonl"),
        ("AttributionBench OOD test", "labels/attributionbench/test-ood-labels.jsonl"),
    ],
)
def test_held_out_figures_are_the_ones_the_readme_states(name, output, tmp_path):
    training = load_script("train_screen")
    figures = training.figures(*training.test_verdicts(labels_file(output, tmp_path), None))
    row = training.table_row(f"{name} (held out)", figures)
    assert row in SUPPORT_GATE.read_text(encoding="utf-8"), f"docs/support-gate.md lacks or differs from: {row}"
    [shipped] = [h for h in HELD_OUT if h.split == name]  # what `citegate demo` prints
    assert as_figures(shipped) == {k: figures[k] for k in as_figures(shipped)}
    assert figures["false_pass"]["rate"] <= 0.05 and figures["false_fail"]["rate"] <= 0.05
    if name != "WiCE test":  # WiCE's supported claims are rarely near-verbatim: docs/support-gate.md says so
        assert figures["recall"]["rate"] >= 0.10


def as_figures(h: HeldOutFigures) -> dict:
    """scripts/train_screen.py figures() from the counts the screen module ships."""

    def rate(k: int, n: int) -> dict:
        low, high = wilson_interval(k, n)
        return {"k": k, "n": n, "rate": k / n if n else None, "low": low, "high": high}

    return {
        "pairs": h.pairs,
        "false_pass": rate(*h.false_pass),
        "false_pass_no": rate(*h.false_pass_no),
        "recall": rate(*h.recall),
        "false_fail": rate(*h.false_fail),
    }


@pytest.mark.parametrize("held", HELD_OUT, ids=lambda h: h.split)
def test_the_readme_rows_and_the_demo_take_the_held_out_figures_from_one_place(held):
    training = load_script("train_screen")
    row = training.table_row(f"{held.split} (held out)", as_figures(held))
    assert row in SUPPORT_GATE.read_text(encoding="utf-8"), f"docs/support-gate.md lacks or differs from: {row}"
    false_pass = f"{held.false_pass[0]}/{held.false_pass[1]} = "
    assert false_pass in row and rate_cell(*held.false_pass) in row and rate_cell(*held.recall) in row


def test_the_shipped_weights_are_what_a_fresh_training_gives():
    training = load_script("train_screen")
    missing = [p for p in training.TUNE.values() if not p.exists()]
    if missing:
        pytest.skip(f"tuning splits not converted here: {missing}")
    done = subprocess.run(
        [sys.executable, str(PROJECT / "scripts" / "train_screen.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"screen_weights\.json: up to date", done.stdout)
