"""Where the sentences of a text end: at a terminator and its closers, not after an abbreviation or inside a number;
the citation markers that follow a full stop stay with the sentence before it (lib/ingest/markers.py)."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence

ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof st sr jr mt ft vs etc inc ltd co corp dept est gen col capt lt sgt rev hon gov sen rep
    ave blvd rd approx apt jan feb mar apr jun jul aug sep sept oct nov dec cf al ca""".split()
)
BEFORE_NUMBER = frozenset("no nos fig figs vol vols p pp art sec ch eq".split())  # "No. 5": an abbreviation
_TERMINATOR = re.compile(r"[.!?\u2026]+|[\u3002\uff01\uff1f]|:(?=\s+[A-Z])")
_CJK_TERMINATORS = "\u3002\uff01\uff1f"
_CLOSERS = "\"'\u201d\u2019)]\u00bb*_"
_WORD_BEFORE = re.compile(r"([A-Za-z](?:[A-Za-z]|\.(?=[A-Za-z]))*)$")


def sentence_ends(text: str, marker_spans: Sequence[tuple[int, int]] = ()) -> list[int]:
    """Where each sentence of text ends (exclusive), the last one at len(text). marker_spans: the markers in text,
    in order (a marker after the terminator stays with its sentence)."""
    starts = [s for s, _ in marker_spans]
    ends: list[int] = []
    for m in _TERMINATOR.finditer(text):
        i = m.end()
        cjk = m.group(0)[-1] in _CJK_TERMINATORS
        while i < len(text) and text[i] in _CLOSERS:
            i += 1
        after_markers = i
        while True:  # markers right after the terminator: "... St. Louis. [1] He", "... day.[2][3] Then"
            j = i
            while j < len(text) and text[j] in " \t":
                j += 1
            k = bisect_right(starts, j - 1)
            if k < len(starts) and starts[k] == j:
                i = marker_spans[k][1]
                while i < len(text) and text[i] in _CLOSERS + ".":
                    i += 1
                continue
            break
        marked = i > after_markers
        if i >= len(text):
            break
        if not cjk and not text[i].isspace():
            continue  # "3.5", "e.g.,", "v2.0": no break
        k = i
        while k < len(text) and text[k].isspace():
            k += 1
        nxt = text[k : k + 1]
        if not cjk and m.group(0)[0] == ".":
            word = _WORD_BEFORE.search(text, max(0, m.start() - 40), m.start())  # a bounded look back: linear
            token = word.group(1) if word else ""
            low = token.lower()
            abbreviation = (
                "." in token
                or (len(token) == 1 and token.isupper())
                or low in ABBREVIATIONS
                or (low in BEFORE_NUMBER and nxt.isdigit())
            )
            if abbreviation and not marked:
                continue
        if not cjk and nxt.islower():
            continue
        ends.append(i)
    if not ends or ends[-1] < len(text):
        ends.append(len(text))
    return ends


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The sentences of a plain text (a chunk's normalized text) as [start, end), without the spaces around them."""
    out, start = [], 0
    for end in sentence_ends(text):
        s, e = start, end
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
        start = end
    return out
