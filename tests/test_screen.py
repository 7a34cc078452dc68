"""The screen citegate-screen-v2 (lib/judge/screen.py): yes, no or undecided, failing closed.

Hand-written pairs; how it reads a pair (lib/judge/screen_reading.py: lead-ins, hedges, word forms, a passage's
lines); properties (an added unsupported clause, a quantity the passage lacks, a hedge the claim drops, whatever
lead-in or hedge the claim has); the held-out figures the README states, recomputed from the converted test
splits; the shipped weights against a fresh training."""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegate_assets.lib.calibration import wilson_interval
from citegate_assets.lib.config import JudgeConfig
from citegate_assets.lib.judge.base import JudgeRequest
from citegate_assets.lib.judge.factory import estimated_cost, make_judge, make_offline_judge
from citegate_assets.lib.judge.screen import (
    HELD_OUT,
    PASSAGE_HEDGES,
    SCREEN_MODEL,
    SCREEN_VERDICTS,
    HeldOutFigures,
    ScreenJudge,
    screen_verdict,
)
from citegate_assets.lib.judge.screen_reading import HEDGES, NUMBER_WORDS, screen_claim, screen_passage
from citegate_assets.lib.numbers import extract_quantities
from citegate_assets.lib.report_view import rate_cell
from tests.test_heuristic_judge import NEGATIONS, NUMBER_MISMATCHES, STRETCHED

PROJECT = Path(__file__).resolve().parents[1]
README = PROJECT / "README.md"

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


# ------------------------------------------------------------------------------------- how it reads a pair


@pytest.mark.parametrize(
    "passage,claim",
    [
        # a lead-in that ties the claim to its source or to the answer around it
        (PLANS, "According to the passage, the Pro plan includes priority support."),
        (PLANS, "Additionally, the Pro plan includes priority support [2]."),
        (PLANS, "It is worth noting that the Pro plan includes priority support."),
        (
            "Regular endurance training lowers the resting heart rate of healthy adults.",
            "Studies have shown that regular endurance training lowers the resting heart rate of healthy adults.",
        ),
        # a hedge, or a "can" / "may", by which the claim says less than the passage
        (PLANS, "The Pro plan typically includes priority support."),
        (
            "Regular endurance training lowers the resting heart rate of healthy adults.",
            "Regular endurance training can lower the resting heart rate of healthy adults.",
        ),
        # a wrapper noun: a flexible type of socket is a flexible socket
        (
            "Flexible sockets prevent undue pressure over sensitive skin and bony prominences.",
            "A flexible type of socket prevents undue pressure over sensitive skin and bony prominences.",
        ),
        # the same word or number in another form
        (
            "A third trailer featured Lana Del Rey, who sings Once Upon a Dream over the closing scene.",
            "Lana Del Rey sang Once Upon a Dream over the closing scene.",
        ),
        ("The Falcons won 3 games in the 2019 season.", "The Falcons won three games in the 2019 season."),
        (
            "The museum reopened on 5 January 2014 after renovation.",
            "The museum reopened on 5 Jan. 2014 after renovation.",
        ),
        (
            "Visitors to the United States need a valid passport and a visa.",
            "Visitors to the U.S. need a valid passport and a visa.",
        ),
        # a passage whose lines are sentences: the next line's negation and contrast are another sentence's
        (
            "Plans\nThe Pro plan includes priority support\nBut the Basic plan does not include phone support",
            "The Pro plan includes priority support.",
        ),
    ],
)
def test_what_the_claim_says_in_other_words_the_passage_supports_is_yes(passage, claim):
    assert screen_verdict(passage, claim) == "yes"


@pytest.mark.parametrize(
    "passage,claim",
    [
        # the passage hedges what the claim states plainly
        (
            "Visual attention seems essential for learning the statistical regularities in our environment.",
            "Visual attention is essential for learning the statistical regularities in our environment.",
        ),
        (
            "The outage was reportedly caused by a misconfigured load balancer in the Frankfurt region.",
            "The outage was caused by a misconfigured load balancer in the Frankfurt region.",
        ),
        (
            "The merger appears to have reduced shipping costs for the Danish subsidiary.",
            "The merger has reduced shipping costs for the Danish subsidiary.",
        ),
        # a stronger modal force than the passage's, or the passage's modal dropped
        (
            "Regular endurance training lowers the resting heart rate of healthy adults.",
            "Regular endurance training must lower the resting heart rate of healthy adults.",
        ),
        (
            "Regular endurance training may lower the resting heart rate of healthy adults.",
            "Regular endurance training lowers the resting heart rate of healthy adults.",
        ),
        # a number word the passage does not have, in words or digits
        ("The Falcons won 3 games in the 2019 season.", "The Falcons won four games in the 2019 season."),
        # words that are other words too are not read as a verb form: "found" is not "find"
        ("The team will find a new coach in 1998.", "The team found a new coach in 1998."),
    ],
)
def test_what_the_passage_only_hedges_or_does_not_say_in_any_form_is_never_yes(passage, claim):
    assert screen_verdict(passage, claim) != "yes"


def test_the_reading_of_a_claim_keeps_what_it_asserts_and_cuts_what_it_does_not():
    passage = screen_passage("Lana Del Rey sings Once Upon a Dream.\n- Released Jan. 5\n• 3 trailers in all")
    assert passage == "Lana Del Rey sings Once Upon a Dream. Released Jan. 5. 3 trailers in all."
    assert screen_claim(passage, "According to the passage, Lana Del Rey often sang three songs [1].") == (
        "Lana Del Rey sing 3 songs."
    )
    # words the passage has stay as they are; a capitalised word is a name, not a verb form
    assert screen_claim(passage, "Often, Lana Del Rey sings in January.") == "Lana Del Rey sings in Jan."
    assert screen_claim(passage, "Lana Del Rey sang with Drew Met.") == "Lana Del Rey sing with Drew Met."
    # the claim's words the passage lacks that are neither a hedge nor another form stay, and keep it from yes
    assert screen_claim(passage, "Lana Del Rey sang three zeppelin songs.") == "Lana Del Rey sing 3 zeppelin songs."


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


LEAD_INS = ["", "According to the passage, ", "However, ", "Studies have shown that ", "It is worth noting that "]


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from(SENTENCES),
    st.sampled_from(LEAD_INS),
    st.sampled_from(sorted(HEDGES)),
    st.lists(OTHER_WORDS, max_size=3),
    st.sampled_from(["and", "with"]),
)
def test_a_lead_in_or_a_hedge_never_changes_the_verdict_nor_lets_an_unsupported_clause_through(
    sentence, lead_in, hedge, extra, joiner
):
    """Whatever lead-in and hedge the claim has, it gets the verdict of the plain claim; words the passage lacks,
    added, still keep it from yes."""
    hedged = lead_in + hedge.capitalize() + ", " + sentence[0].lower() + sentence[1:]
    assert screen_verdict(PASSAGE_WITH_MUSEUM, hedged) == screen_verdict(PASSAGE_WITH_MUSEUM, sentence)
    if extra:
        stretched = hedged.rstrip(".") + f" {joiner} {' '.join(extra)}."
        assert screen_verdict(PASSAGE_WITH_MUSEUM, stretched) != "yes"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(PASSAGE_HEDGES)), st.sampled_from([0, 1, 3]))
def test_a_hedge_in_the_passage_that_the_claim_drops_is_never_yes(hedge, where):
    """The passage only reports or supposes what the claim states ("seems", "reportedly", "estimated"): not yes."""
    claim = "The museum opened the orchard to visitors in 1998."
    assert screen_verdict(PASSAGE_WITH_MUSEUM, claim) == "yes"
    words = claim.split()
    hedged = " ".join(words[: where + 1] + [hedge] + words[where + 1 :])
    assert screen_verdict(PASSAGE_WITH_MUSEUM.replace(claim, hedged), claim) != "yes"


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SENTENCES), st.sampled_from(sorted(NUMBER_WORDS)), st.sampled_from(["", " days", " percent"]))
def test_a_claim_number_word_whose_value_the_passage_lacks_is_never_yes(sentence, word, unit):
    values = {q.value for q in extract_quantities(PASSAGE_WITH_MUSEUM)}
    if NUMBER_WORDS[word] in values:
        word = "ninety" if "90" not in values else "eighty"
    claim = sentence.rstrip(".") + f" for {word}{unit}."
    assert screen_verdict(PASSAGE_WITH_MUSEUM, claim) != "yes"


@settings(max_examples=60, deadline=None)
@given(st.lists(WORDS, min_size=3, max_size=8, unique=True), st.lists(OTHER_WORDS, min_size=3, max_size=6, unique=True))
def test_a_claim_of_absent_words_is_no_and_never_yes(present, absent):
    passage = "The " + " ".join(present) + " was recorded in the ledger."
    assert screen_verdict(passage, "The " + " ".join(absent) + " arrived.") == "no"


# -------------------------------------------------------------------------------------- the Judge protocol


def test_the_screen_is_the_default_offline_judge_and_the_others_warn(caplog):
    judge = make_judge(JudgeConfig(), env={})
    assert isinstance(judge, ScreenJudge) and judge.model == SCREEN_MODEL == "citegate-screen-v2"
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


# ------------------------------------------------------------------------ the figures the README states


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
    assert row in README.read_text(encoding="utf-8"), f"README lacks or differs from: {row}"
    [shipped] = [h for h in HELD_OUT if h.split == name]  # what `citegate demo` prints
    assert as_figures(shipped) == {k: figures[k] for k in as_figures(shipped)}
    assert figures["false_pass"]["rate"] <= 0.05 and figures["false_fail"]["rate"] <= 0.05
    if name != "WiCE test":  # WiCE's supported claims are rarely near-verbatim: the README says so
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
    assert row in README.read_text(encoding="utf-8"), f"README lacks or differs from: {row}"
    false_pass = f"{held.false_pass[0]}/{held.false_pass[1]} = "
    assert false_pass in row and rate_cell(*held.false_pass) in row and rate_cell(*held.recall) in row


def test_a_tuning_set_whose_negatives_the_rules_hold_asks_for_no_cut():
    """The threshold is the highest of the tuning sets' own: a set that needs no cut must not impose its lowest
    score on the others."""
    training = load_script("train_screen")
    scores = np.array([2.0, 1.0, 0.5, -np.inf, -np.inf])  # -inf: the rules forbid yes
    negative = np.array([False, False, True, True, True])
    assert training.lowest_threshold(scores, negative, 0.5) is None  # 1 of 3 negatives allowed; 1 can pass at all
    assert training.lowest_threshold(scores, negative, 0.2) == 1.0  # none allowed: the lowest score above 0.5


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
