"""The content locator's compiled pass (lib/ingest/_locate.c) finds what its Python path finds: the same regions,
position hints, truncations and work, and the same stop at the work budget, on arbitrary prompts."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from citegate_assets.lib.ingest import locate

from .test_locate_budget import SHAPES

compiled = pytest.mark.skipif(locate._compiled is None, reason="no C compiler built lib/ingest/_locate.c")

# few words, so chunks share openings, recur and stand inside each other; characters of each width a str stores
WORDS = [
    "refunds take",
    "days",
    "the",
    "a",
    "ab",
    "Source 2:",
    "[3]",
    "doc 01",
    "é",
    "日本",
    "𝔘",
    "\n",
    ":",
    "kb-1",
    "—",
]
HEADERS = ["Source 1:", "Source 2: ", "[2] ", "[kb-2] ", '<document index="3"><source>kb-3</source> ', "chunk #4 -"]
IDS = ["kb-1", "kb-2", "kb-3", "kb-2", "1"]


def _both(prompt: str, chunks: list[tuple[str, str]], lo: int = 0, hi: int | None = None):
    fast = locate.locate_chunks(prompt, chunks, lo, hi)
    compiled, locate._compiled = locate._compiled, None
    try:
        slow = locate.locate_chunks(prompt, chunks, lo, hi)
    finally:
        locate._compiled = compiled
    return fast, slow


@st.composite
def prompts(draw):
    """Chunks, and a prompt that holds them whole, cut, re-split around template text, twice or not at all."""
    words = st.lists(st.sampled_from(WORDS), min_size=12, max_size=60).map(" ".join)  # past MIN_PREFIX_CHARS
    texts = draw(st.lists(words, min_size=1, max_size=4))
    chunks = [(draw(st.sampled_from(IDS)), draw(st.sampled_from(texts))) for _ in range(draw(st.integers(1, 6)))]
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        text = draw(st.sampled_from(texts))
        how = draw(st.sampled_from(["whole", "cut", "pieces", "header", "words", "nothing"]))
        if how == "whole":
            parts.append(text)
        elif how == "cut":
            parts.append(text[: draw(st.integers(0, len(text)))])
        elif how == "pieces":
            cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=3)))
            for a, b in zip([0, *cuts], [*cuts, len(text)]):
                parts += [text[a:b], draw(st.sampled_from(HEADERS))]
        elif how == "header":
            parts.append(draw(st.sampled_from(HEADERS)))
        elif how == "words":
            parts.append(draw(words))
    prompt = draw(st.sampled_from(["", " ", "\n"])).join(parts)
    lo = draw(st.integers(0, len(prompt)))
    hi = draw(st.one_of(st.none(), st.integers(lo, len(prompt))))
    return prompt, chunks, (0, None) if draw(st.booleans()) else (lo, hi)


def test_the_compiled_pass_is_built_where_ci_runs():
    if locate._compiled is None and not os.environ.get("CI"):
        pytest.skip("no C compiler built lib/ingest/_locate.c: chunks are located by the Python path")
    assert locate._compiled is not None


@compiled
@settings(max_examples=1500, database=None, deadline=None)
@given(prompts(), st.sampled_from([(32_000_000, 128), (0, 1), (0, 2), (0, 4), (300, 0)]))
def test_the_compiled_pass_finds_what_the_python_path_finds(case, budget):
    prompt, chunks, (lo, hi) = case
    work_min, per_char = budget  # small budgets stop the search at every point where the work is charged
    saved = locate.WORK_MIN, locate.WORK_PER_CHAR
    locate.WORK_MIN, locate.WORK_PER_CHAR = work_min, per_char
    try:
        fast, slow = _both(prompt, chunks, lo, hi)
    finally:
        locate.WORK_MIN, locate.WORK_PER_CHAR = saved
    assert fast == slow


@compiled
def test_the_generated_cases_reach_every_outcome():
    """The property above is only as good as its cases: they locate whole, cut and re-split chunks, read headers, and
    stop at the budget."""
    seen = set()

    @settings(max_examples=400, database=None, deadline=None)
    @given(prompts())
    def collect(case):
        prompt, chunks, (lo, hi) = case
        got = locate.locate_chunks(prompt, chunks, lo, hi)
        seen.update(r.how for r in got.regions)
        seen.update("hint" for r in got.regions if r.header_ref)
        seen.update("truncated" for _ in got.truncated)
        saved = locate.WORK_MIN, locate.WORK_PER_CHAR
        locate.WORK_MIN, locate.WORK_PER_CHAR = 0, 2
        try:
            seen.update("over" for _ in [0] if locate.locate_chunks(prompt, chunks, lo, hi).over_budget)
        finally:
            locate.WORK_MIN, locate.WORK_PER_CHAR = saved

    collect()
    assert seen >= {"whole", "prefix", "piece", "hint", "truncated", "over"}


@compiled
@pytest.mark.parametrize("shape", SHAPES)
def test_the_adversarial_shapes_end_the_same_way(shape):
    prompt, texts = SHAPES[shape]()
    fast, slow = _both(prompt, [(f"c{i}", t) for i, t in enumerate(texts)])
    assert fast == slow


@compiled
def test_a_chunk_that_is_not_text_is_refused():
    with pytest.raises(TypeError, match="chunk_id, str"):
        locate.locate_chunks("Source 1: refunds", [("kb-1", ["refunds"])])  # type: ignore[list-item]
