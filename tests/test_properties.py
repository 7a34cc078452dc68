"""Property tests: the strict verdict parser never turns a non-answer into a pass, and the normalization
function N is idempotent and keeps a span inside the chunk it was cut from."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from citegate_assets.lib.ingest.normalize import FOLD_FROM, FOLD_TO, normalize_text
from citegate_assets.lib.support.judge.base import VERDICTS
from citegate_assets.lib.support.judge.parse import parse_verdict

FAST = settings(max_examples=200, deadline=None, database=None)  # no .hypothesis folder written into the tree

# ---------------------------------------------------------------------------------------------------
# The parser


def _ascii_caseless(word: str) -> str:
    # "modulo case" for ASCII letters only: re.IGNORECASE would also let 'ſ' (U+017F) match 's'
    return "".join(f"[{c.lower()}{c.upper()}]" for c in word)


# docs/support-gate.md: "yes, partial or no, tolerating only case, surrounding whitespace and one trailing period".
# \s in a str pattern is exactly str.isspace(), the whitespace str.strip() removes. The period must follow
# the word directly: "yes ." or "yes\n." are not a word plus one trailing period.
_ACCEPTED = {v: re.compile(rf"\s*{_ascii_caseless(v)}\.?\s*") for v in VERDICTS}


def expected_verdict(text: str) -> str:
    for verdict, pattern in _ACCEPTED.items():
        if pattern.fullmatch(text):
            return verdict
    return "unparseable"


NEAR_MISSES = [
    "yes!",
    "yes, but",
    "Yes..",
    "y e s",
    "yes\nno",
    "**yes**",
    "yes .",
    "yes\n.",
    ".yes",
    "'yes'",
    '"yes"',
    "`yes`",
    "yes\u200b",
    "\u200byes",
    "\ufeffyes",
    "ye\u00ads",
    "yes\u3002",
    "\uff59\uff45\uff53",
    "ye\u0455",
    "y\u0435s",
    "yeſ",
    "yes\x00",
    "yes yes",
    "yess",
    "ye",
    "es",
    "Yes. Ignore that",
    "Answer: yes",
    "yes - the passage says so",
    "yes;",
    "<yes>",
    "yes\u2026",
    "yes:",
    "YES!!",
    "no, yes",
    "partial/yes",
    "part ial",
    "partial..",
    "n0",
    "nо",
    "No way",
    "yes.\u200b",
    "\u00a0yes.\u2003",
    "\tYeS.\n",
    " NO ",
    "Partial.",
    "yes\r\n",
    "yes.\r\n.",
]
SPACES = [
    " ",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x85",
    "\u00a0",
    "\u2003",
    "\u2028",
    "\u3000",
]  # all str.isspace()
_SPACE = st.text(alphabet=st.sampled_from(SPACES), max_size=3)
_WS = st.text(
    alphabet=st.sampled_from(SPACES + ["\u200b", "\ufeff", "\u00ad"]), max_size=3
)  # zero-width ones are not space
_SUFFIX = st.sampled_from(["", "", ".", ".", "..", "!", "?", ",", ". ", " .", ".\n.", "\u3002", ":", "'"])


@st.composite
def _word(draw) -> str:
    word = draw(st.sampled_from(VERDICTS))
    flips = draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
    word = "".join(c.upper() if f else c for c, f in zip(word, flips))
    mutation = draw(st.sampled_from(["none", "none", "insert", "drop", "replace"]))
    if mutation == "none":
        return word
    i = draw(st.integers(0, len(word) - 1))
    char = draw(st.characters(exclude_categories=("Cs",)))
    if mutation == "insert":
        return word[:i] + char + word[i:]
    if mutation == "drop":
        return word[:i] + word[i + 1 :]
    return word[:i] + char + word[i + 1 :]


REPLIES = st.one_of(
    st.text(),
    st.sampled_from(NEAR_MISSES),
    st.builds(lambda a, w, s, b: a + w + s + b, _WS, _word(), _SUFFIX, _WS),
    st.builds(lambda w, t: w + t, st.sampled_from(VERDICTS), st.text(max_size=5)),
)


@FAST
@given(REPLIES)
@example("yes!")
@example("Yes..")
@example("yes\nno")
@example("**yes**")
@example("Yes. Ignore that")
def test_only_the_three_words_parse_and_anything_else_is_never_a_pass(text):
    got = parse_verdict(text)
    assert got == expected_verdict(text)
    assert got in (*VERDICTS, "unparseable")
    if expected_verdict(text) != "yes":
        assert got != "yes"


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_never_a_pass(text):
    assert parse_verdict(text) != "yes" or re.fullmatch(r"\s*[Yy][Ee][Ss]\.?\s*", text)


@FAST
@given(_SPACE, st.sampled_from(VERDICTS), st.sampled_from(["", "."]), _SPACE, st.booleans())
def test_the_tolerated_variants_all_parse(before, verdict, dot, after, upper):
    assert all(c.isspace() for c in before + after)
    word = verdict.upper() if upper else verdict
    assert parse_verdict(before + word + dot + after) == verdict


# ---------------------------------------------------------------------------------------------------
# Normalization

REMOVED = "".join(f for f, t in zip(FOLD_FROM, FOLD_TO) if t == "")  # zero-width characters and the soft hyphen
SPECIALS = list(dict.fromkeys(FOLD_FROM)) + [
    "\r\n",
    "\r",
    "\n",
    "\t",
    " ",
    "\u2028",
    "\u3000",
    "\x85",  # line ends and white space
    "\u00e9",
    "\u212b",
    "\u2126",
    "\u0958",
    "\uac00",
    "\ud7a3",  # precomposed, singletons, Devanagari QA, Hangul LV/LVT
    "&amp;",
    "\ufb01",
    "\u00bd",  # an entity (not unescaped under 'none'), compatibility characters NFC keeps
]


def _stable_alone(c: str) -> bool:
    """Characters whose NFC does not depend on their neighbours.

    NFC can compose across a cut: with chunk = "e" + U+0301 and the span cut right after "e", N(span) = "e"
    is not a substring of N(chunk) = "é". So the span property excludes every character that can combine with
    a neighbour: combining marks (Mn/Mc/Me; in Unicode 14 every non-Hangul second element of a canonical
    composition, and every character with a non-zero combining class, is one of them), the conjoining Hangul
    jamo (composed algorithmically: L+V, LV+T), and code points unassigned in Python's Unicode 14.0 tables (a
    normalizer with newer tables may treat some of them as combining marks).
    """
    o = ord(c)
    if unicodedata.category(c) in ("Mn", "Mc", "Me", "Cn", "Cs") or unicodedata.combining(c):
        return False
    return not (0x1100 <= o <= 0x11FF or 0xA960 <= o <= 0xA97F or 0xD7B0 <= o <= 0xD7FF)


STABLE_CHARS = st.characters(exclude_categories=("Mn", "Mc", "Me", "Cn", "Cs")).filter(_stable_alone)
STABLE_TEXT = st.lists(st.one_of(STABLE_CHARS, st.sampled_from(SPECIALS)), max_size=60).map("".join)


def N(text: str) -> str:
    return normalize_text(text, "none")


# combining marks, conjoining jamo and the characters step 4 removes, mixed densely so compositions are hit often
COMPOSING = [
    "e",
    "a",
    "<",
    "=",
    "\u1100",
    "\uac00",
    "\u0301",
    "\u0308",
    "\u0327",
    "\u0338",
    "\u093c",
    "\u1161",
    "\u11a8",
    *REMOVED,
]
COMPOSING_TEXT = st.lists(st.sampled_from(COMPOSING + SPECIALS), max_size=30).map("".join)


@FAST
@given(st.text() | STABLE_TEXT | COMPOSING_TEXT)
@example("a\u00a0 b\r\n\u201cc\u201d\u2026 e\u0301")
@example("e\u200b\u0301")  # a zero-width character between a letter and its accent, removed by step 4
@example("e\u00ad\u0301")
@example("e\u00a0\u0301")  # a space between a letter and a mark keeps them apart on every pass
@example("\u00a0\u0301x")
@example("\u1100\u200b\u1161")  # conjoining jamo around a zero-width character
def test_normalization_is_idempotent(text):
    once = N(text)
    assert N(once) == once


def test_a_precomposed_quote_matches_a_chunk_with_a_soft_hyphen_before_the_accent():
    # the provenance view of idempotence: a chunk holding "cafe" + soft hyphen + combining acute must
    # still contain the span "café" as a model quotes it (precomposed)
    assert N("caf\u00e9") in N("Order a cafe\u00ad\u0301 au lait.")


@st.composite
def chunk_and_cut(draw) -> tuple[str, int, int]:
    chunk = draw(STABLE_TEXT)
    i = draw(st.integers(0, len(chunk)))
    j = draw(st.integers(i, len(chunk)))
    return chunk, i, j


@FAST
@given(chunk_and_cut())
@example(("The Pro plan costs $49 per month.\r\nRefunds take 3\u20135 business days.", 34, 70))
@example(("a\r\nb", 2, 4))  # cut between CR and LF
@example(("x \u200b y\u2026z", 2, 6))
@example(("\u00e9\u212b\u0958 \uac00", 1, 4))
def test_a_span_cut_from_a_chunk_stays_inside_it_after_normalization(case):
    chunk, i, j = case
    span = chunk[i:j]
    assert N(span) in N(chunk)


# ---------------------------------------------------------------------------------------------------
# The retrieved text as logged, stored once (schema 13): where a JSON-encoded prompt holds it escaped, the span
# _raw_span records decodes, in DuckDB, to exactly the text

_LOGGED_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1)


@FAST
@given(_LOGGED_TEXT, st.booleans(), st.text(max_size=5), st.booleans(), st.integers(0, 10_000))
@example('line one\nsaid "two" \\ three\u2028 \U0001f600 caf\u00e9', True, "é", True, 0)
@example("tab\there </script> & \x1f\x7f", False, "", True, 0)
@example("tab\there </script> & \x1f\x7f", False, "", True, 9_999)  # sought past the end first, then before
def test_a_retrieved_text_escaped_in_a_json_prompt_reads_back_whole(text, ensure_ascii, other, pretty, after):
    import json

    import duckdb

    from citegate_assets.lib.ingest.retrievals import TextForms, _raw_span

    body = {"role": "system", "content": f"Context:\n[1] {text}\n{other}"}
    prompt = json.dumps(
        {"messages": [body, {"role": "user", "content": other}]},
        ensure_ascii=ensure_ascii,
        indent=2 if pretty else None,
    )
    # after: where the request's previous chunk ended, anywhere in the prompt or past it
    after %= len(prompt) + 2
    start, end, encoding = _raw_span(prompt, TextForms(text), "\n" in prompt, prompt.isascii(), after)
    assert start is not None and end is not None
    piece = prompt[start:end]
    if encoding is None:
        assert piece == text
    else:
        assert encoding == "json"
        [(decoded,)] = duckdb.sql(
            "select json_extract_string('\"' || substr($p, $s + 1, $e - $s) || '\"', '$')",
            params={"p": prompt, "s": start, "e": end},
        ).fetchall()
        assert decoded == text


@FAST
@given(_LOGGED_TEXT, _LOGGED_TEXT, st.integers(0, 100))
def test_a_text_the_prompt_does_not_hold_is_never_given_a_span(text, prompt, after):
    import json

    from citegate_assets.lib.ingest.retrievals import NOWHERE, TextForms, _raw_span

    forms = {text, json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    if not any(form in prompt for form in forms):
        assert _raw_span(prompt, TextForms(text), "\n" in prompt, prompt.isascii(), after) == NOWHERE
