"""The strict verdict parser and the judge prompt (the seed's, word for word)."""

import pytest

from citegate_assets.lib.support.judge.parse import parse_verdict
from citegate_assets.lib.support.judge.prompt import TEMPLATE_V1, TEMPLATE_VERSION, render_prompt


@pytest.mark.parametrize(
    "raw,verdict",
    [
        ("yes", "yes"),
        ("Yes.", "yes"),
        (" partial\n", "partial"),
        ("NO", "no"),
        ("no.\n", "no"),
        ("yes, because the passage says so", "unparseable"),
        ("yes..", "unparseable"),
        ("Answer: yes", "unparseable"),
        ("", "unparseable"),
        (None, "unparseable"),
        ("y", "unparseable"),
        ("yes no", "unparseable"),
    ],
)
def test_parse(raw, verdict):
    assert parse_verdict(raw) == verdict


def test_template_is_the_seeds_word_for_word():
    seed = (
        "You are checking one citation. You have no other information.\n\n"
        "PASSAGE:\n"
        "{passage_text}\n\n"
        "CLAIM:\n"
        "{claim_sentence}\n\n"
        "Does the PASSAGE alone entail the CLAIM?\n"
        "Answer with exactly one word: yes, partial, or no.\n"
        "Do not explain. Do not use outside knowledge.\n"
        "If the PASSAGE needs other context to support the CLAIM, answer no."
    )
    assert TEMPLATE_V1 == seed and TEMPLATE_VERSION == "v1"


def test_braces_in_passage_stay_inert():
    out = render_prompt("a {claim_sentence} b {}", "c")
    assert out.count("PASSAGE:") == 1 and "a {claim_sentence} b {}" in out and out.count("\nc\n") == 1
