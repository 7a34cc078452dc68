"""N, step by step: the same function on prompt, span and chunk text; canonicalization is idempotent."""

import pytest

from citegate_assets.lib.ingest.normalize import normalize_text, normalize_texts


@pytest.mark.parametrize(
    "raw,expected",
    [
        ("a\r\nb\rc", "a b c"),  # step 3: line endings (then whitespace collapses them)
        ("e\u0301t\u00e9", "\u00e9t\u00e9"),  # step 3: NFC composes e + combining acute
        ("\u201cquoted\u201d \u2018x\u2019", "\"quoted\" 'x'"),  # step 4: curly quotes
        ("3\u20135 \u2014 x \u2212 1", "3-5 - x - 1"),  # step 4: en dash, em dash, minus
        ("wait\u2026", "wait..."),  # step 4: ellipsis
        ("a\u00a0b\u202fc", "a b c"),  # step 4: no-break spaces
        ("zero\u200bwidth\ufeff", "zerowidth"),  # step 4: zero-width characters vanish
        ("  many   spaces\t\tand\n\nlines  ", "many spaces and lines"),  # step 5
        ("", ""),
    ],
)
def test_each_step(raw, expected):
    assert normalize_text(raw) == expected


def test_html_unescape_only_where_the_profile_says():
    assert normalize_text("Tom &amp; Jerry &lt;b&gt; &quot;x&quot;", "html") == 'Tom & Jerry <b> "x"'
    assert normalize_text("Tom &amp; Jerry", "none") == "Tom &amp; Jerry"


def test_unescape_is_single_pass():
    # the template escaped "&lt;" into "&amp;lt;": one pass restores what the template saw
    assert normalize_text("a &amp;lt; b", "html") == "a &lt; b"


def test_identical_on_both_sides():
    chunk = "Refunds take 3\u20135\u00a0business days \u2014 \u201cno exceptions\u201d."
    prompt = f"Context:\n[c1] {chunk}\r\n\r\nQuestion: why?"
    span = 'Refunds take 3-5 business days - "no exceptions".'
    n_chunk, n_prompt, n_span = normalize_texts([chunk, prompt, span])
    assert n_span == n_chunk
    assert n_span in n_prompt


@pytest.mark.parametrize("text", ["a\u00a0 b\r\n\u201cc\u201d\u2026 e\u0301", "plain", "  \t\n", "x\u2014y\u200b"])
def test_idempotent(text):
    once = normalize_text(text)
    assert normalize_text(once) == once


def test_repeated_texts_normalized_once_give_each_its_own_n():
    # a batch's chunks repeat across requests: N runs once per distinct text (NFC included) and fans back out
    texts = ["caf\u00e9 e\u0301 x", None, "a\u200b\u0301  b", "caf\u00e9 e\u0301 x", None, "", "a\u200b\u0301  b"] * 3
    alone = [None if t is None else normalize_text(t) for t in texts]
    assert normalize_texts(texts) == alone
    assert alone[0] == "caf\u00e9 \u00e9 x" and alone[2] == "\u00e1 b"
