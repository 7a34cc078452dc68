"""The content locator behind template `auto` (and the guard): whole, cut, in pieces, missing; hints."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegate_assets.lib.ingest.locate import (
    _POSITION_HINT,
    _POSITION_HINT_ALTERNATIVES,
    locate_chunks,
    positional_ref,
)

A = "Refunds take 3-5 business days after the return is received at our warehouse in Leeds."
B = "The Pro plan costs $49 per month and includes priority support for every seat on the account."
C = "Data is retained for 90 days. After that it is deleted permanently from all regions worldwide."


def test_whole_chunks_and_context_block():
    prompt = f"Answer from the sources. Source 1: {A} Source 2: {B} Query: how long do refunds take?"
    got = locate_chunks(prompt, [("a", A), ("b", B), ("c", C)])
    assert [(r.chunk_id, r.how) for r in got.regions] == [("a", "whole"), ("b", "whole")]
    assert got.found("c") == "missing"
    start, end = got.context
    assert prompt[start:end].startswith("Refunds") and prompt[start:end].endswith("account.")
    assert got.positions == {"1": "a", "2": "b"}


def test_cut_off_prefix_is_truncated():
    cut = C[:50]
    prompt = f"Context: [a] {A} [c] {cut} Question: what happens after 90 days?"
    got = locate_chunks(prompt, [("a", A), ("c", C)])
    assert got.found("c") == "cut" and got.arrived_chars["c"] == 50 and "c" in got.truncated


def test_re_split_chunk_in_pieces_with_overlap_and_metadata_between():
    long = " ".join([A, B, C])
    first, second = long[:120], long[100:]  # the splitter's overlap: 20 chars repeated
    prompt = f"Source 1: {first} file_path: /data/kb.txt Source 2: {second} Query: q"
    got = locate_chunks(prompt, [("x", long)])
    assert got.found("x") == "pieces"
    assert [r.header_ref for r in got.regions] == ["1", "2"]
    assert got.positions == {"1": "x", "2": "x"}


def test_pieces_that_stop_early_are_truncated():
    long = " ".join([A, B, C])
    prompt = f"Source 1: {long[:120]} Source 2: {long[120:200]} Query: q"
    got = locate_chunks(prompt, [("x", long)])
    assert got.found("x") == "cut" and got.arrived_chars["x"] == 200


def test_equal_texts_told_apart_by_the_id_before_them():
    prompt = f"[kb-2] {A} [kb-1] {A} end"
    got = locate_chunks(prompt, [("kb-1", A), ("kb-2", A)])
    by_id = {r.chunk_id: r.start for r in got.regions}
    assert by_id["kb-2"] < by_id["kb-1"]


def test_a_short_common_start_is_not_a_truncated_chunk():
    prompt = f"[a] {A} Question: Refunds take how long?"
    got = locate_chunks(prompt, [("a", A), ("z", "Refunds take 10 days for hardware returned from abroad, by post.")])
    assert got.found("z") == "missing"


def test_anthropic_index_hint():
    prompt = (
        f'<documents> <document index="1"> <source>kb-9</source> <document_content> {B} '
        "</document_content> </document> </documents>"
    )
    got = locate_chunks(prompt, [("kb-9", B)])
    assert got.positions == {"1": "kb-9"}


def test_positional_refs():
    assert [positional_ref(x) for x in ("2", "[2]", "Source 2", "source 2:", "kb-2", "[kb-2]", "02")] == [
        "2",
        "2",
        "2",
        "2",
        None,
        None,
        "2",
    ]


@pytest.mark.parametrize("path", ["compiled", "python"])
def test_find_text_is_str_find(path, monkeypatch):
    # the head-first search must give str.find's answer, including a head that recurs before the whole text
    import random

    from citegate_assets.lib.ingest import locate
    from citegate_assets.lib.ingest.locate import HEAD_CHARS, find_text

    if path == "compiled" and locate._compiled is None:
        pytest.skip("no C compiler built lib/ingest/_locate.c")
    if path == "python":
        monkeypatch.setattr(locate, "_compiled", None)

    rng = random.Random(16)
    for _ in range(20000):
        prompt = "".join(rng.choice("ab é") for _ in range(rng.randint(0, 400)))
        if prompt and rng.random() < 0.5:
            at = rng.randrange(len(prompt))
            text = prompt[at : at + rng.randint(1, 3 * HEAD_CHARS)]
        else:
            text = "".join(rng.choice("ab é") for _ in range(rng.randint(1, 3 * HEAD_CHARS)))
        lo, hi = rng.randint(-5, len(prompt) + 5), rng.randint(-5, len(prompt) + 5)
        assert find_text(prompt, text) == prompt.find(text)
        assert find_text(prompt, text, lo, hi) == prompt.find(text, lo, hi)


HINT_PIECES = st.sampled_from(
    [
        "Source",
        "source ",
        "DOC",
        "document #",
        "chunk",
        "Passage",
        "context",
        "reference",
        "ref",
        "[",
        "]",
        "index=",
        'index="',
        "<",
        ">",
        "<b>",
        "12",
        "3",
        "0042",
        ":",
        " ",
        "\n",
        "\t",
        "-",
        "x",
        "ſ",
        "İ",
        "ı",
        "word",
    ]
)


@settings(max_examples=600, database=None)
@given(st.lists(st.one_of(HINT_PIECES, st.text(max_size=4)), max_size=30).map("".join))
def test_the_position_hint_lookahead_changes_no_match(window):
    plain = re.compile(_POSITION_HINT_ALTERNATIVES, re.IGNORECASE)
    fast, slow = _POSITION_HINT.search(window), plain.search(window)
    assert (fast and (fast.span(), fast.groups())) == (slow and (slow.span(), slow.groups()))
