"""Span-less citations (a marker, or `{chunk_id, claim}`): the claim anchored to the cited chunk's best-supporting
sentence, and where that sentence stands in the prompt (docs/provenance-gate.md).

Deterministic and lexical: each sentence of the chunk's retrieved text (normalized) is scored by the content words
and numbers it shares with the claim (the offline judges' tokenizer and stemmer, lib/support/judge/heuristic.py), each
shared term weighted by how rare it is among the chunk's sentences; the best score wins, the earliest on a tie; no
shared term means no anchor. A "sentence" longer than MAX_SENTENCE_CHARS (a list or a table that normalization
made one line) is cut at its clauses, so an anchor stays a sentence-sized stretch.

Plain Python: ingest (lib/ingest/citation_rows.py) and the call-time guard (lib/ingest/layout.py) call the same
functions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from citegate_assets.lib.core.tokens import anchor_terms
from citegate_assets.lib.ingest.sentences import sentence_spans

MAX_SENTENCE_CHARS = 400
_CLAUSE_BREAK = re.compile(r"[;:,]\s|\s[-\u2013\u2014]\s")


@dataclass(frozen=True)
class Stretch:
    """A section of the cited chunk in the normalized prompt: [body_start, body_end) holds the chunk's text
    [chunk_from, chunk_to) when that is known (a chunk found by its content, or a section body that is a prefix of
    its text), else None (a body that differs from the text: the anchor is sought in it)."""

    body_start: int
    body_end: int
    chunk_from: int | None
    chunk_to: int | None


def _cut(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """A long sentence as clause-bounded pieces of at most MAX_SENTENCE_CHARS."""
    out = []
    while end - start > MAX_SENTENCE_CHARS:
        limit = start + MAX_SENTENCE_CHARS
        breaks = [m.end() for m in _CLAUSE_BREAK.finditer(text, start + 1, limit)]
        cut = breaks[-1] if breaks else (text.rfind(" ", start + 1, limit) + 1 or limit)
        if cut <= start:
            cut = limit
        piece_end = cut
        while piece_end > start and text[piece_end - 1].isspace():
            piece_end -= 1
        out.append((start, piece_end))
        start = cut
    out.append((start, end))
    return out


@lru_cache(maxsize=4096)
def _units(text: str) -> tuple[tuple[tuple[int, int], ...], tuple[frozenset[str], ...]]:
    """A chunk's sentences (long ones cut) and each one's terms, read once per distinct text."""
    spans = [piece for s, e in sentence_spans(text) for piece in _cut(text, s, e)]
    return tuple(spans), tuple(frozenset(anchor_terms(text[s:e])) for s, e in spans)


def anchor_sentence(claim: str, chunk_text: str) -> tuple[int, int] | None:
    """[start, end) in chunk_text (normalized) of the sentence that supports the claim (normalized) best, or None
    when no sentence shares a content word or a number with it."""
    want = anchor_terms(claim)
    if not want or not chunk_text:
        return None
    spans, terms = _units(chunk_text)
    shared = [t & want for t in terms]
    frequency: dict[str, int] = {}
    for found in shared:
        for term in found:
            frequency[term] = frequency.get(term, 0) + 1
    n = len(spans)
    best, best_score = None, 0.0
    for span, found in zip(spans, shared):
        score = sum(math.log(1 + n / frequency[t]) for t in found)
        if score > best_score + 1e-12:
            best, best_score = span, score
    return best


def anchor_in_prompt(
    claim: str, anchor: tuple[int, int], chunk_text: str, prompt: str, stretches: list[Stretch]
) -> tuple[int, int] | None:
    """[start, end) of the anchor in the prompt when it reached the prompt (across the pieces of a re-split chunk, the
    end in the last piece), else None. An anchor the prompt's cut runs through counts as reached when its part before
    the cut holds every word and number it shares with the claim (then that part is placed)."""
    a, b = anchor
    mapped = [(s.chunk_from, s.chunk_to, s.body_start) for s in stretches if s.chunk_from is not None]
    start = end = None
    covered = a
    while covered < b:
        holding = [m for m in mapped if m[1] is not None and m[0] <= covered < m[1]]
        if not holding:
            break
        cfrom, cto, body_start = max(holding, key=lambda m: (m[1], -m[2]))
        if start is None:
            start = body_start + (covered - cfrom)
        covered = min(b, cto or b)
        end = body_start + (covered - cfrom)
    if covered >= b and start is not None and end is not None:
        return start, end
    if start is not None and end is not None:
        want = anchor_terms(claim)
        if (anchor_terms(chunk_text[a:b]) & want) <= anchor_terms(chunk_text[a:covered]):
            while end > start and prompt[end - 1].isspace():
                end -= 1
            return start, end
    text = chunk_text[a:b]
    for s in sorted((s for s in stretches if s.chunk_from is None), key=lambda s: s.body_start):
        at = prompt.find(text, s.body_start, s.body_end)
        if at >= 0:
            return at, at + len(text)
    return None


def passage_section_index(sections: list[tuple[int, int]], found_start: int | None) -> int | None:
    """Which of the cited chunk's sections (body_start, body_end), in section order, is the passage the support gate
    judges: the first that holds where the span or anchor starts, else (no place found) the first."""
    if not sections:
        return None
    if found_start is None:
        return 0
    for i, (start, end) in enumerate(sections):
        if start <= found_start < end:
            return i
    return None
