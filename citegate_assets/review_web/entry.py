"""One queue entry as the entry page shows it: the passage with the span marked, the retrieved text with the cut
point marked (truncation), the prompt around the span. Text pieces only; the template escapes every one."""

from __future__ import annotations

from dataclasses import dataclass

from citegate_assets.lib.review.queue_view import NO_PASSAGE, PASSAGE_SOURCES, _span_in_passage

CONTEXT_CHARS = 300
PASSAGE_CHARS = 4000


@dataclass(frozen=True)
class Piece:
    text: str
    # "" plain | "span" the cited span or anchor | "region" the section or block | "lost" cut off | "lost_span" the
    # anchor where it was cut off | "gap" elided
    kind: str = ""


def _clip(text: str, n: int) -> list[Piece]:
    return [Piece(text)] if len(text) <= n else [Piece(text[:n]), Piece(f" … {len(text) - n:,} more characters", "gap")]


def passage_pieces(entry: dict) -> list[Piece]:
    """The passage (as it reached the prompt, else as retrieved) with the span marked when it is found in it."""
    passage = entry.get("passage")
    if passage is None:
        return []
    where = _span_in_passage(entry, passage)
    if where is None:
        return _clip(passage, PASSAGE_CHARS)
    start, end = where
    return [Piece(passage[:start]), Piece(passage[start:end], "span"), *_clip(passage[end:], PASSAGE_CHARS)]


def passage_source(entry: dict) -> str:
    if entry.get("passage") is None:
        return NO_PASSAGE
    return PASSAGE_SOURCES.get(entry.get("passage_source") or "", NO_PASSAGE)


def cut_pieces(
    in_prompt: str | None, retrieved: str | None, anchor: tuple[int, int] | None = None
) -> list[Piece] | None:
    """For a truncated chunk: the retrieved text, the part that reached the prompt then the part cut off, a
    span-less citation's anchor (offsets in the retrieved text) marked; None when the prompt's part is not found at
    the start of the retrieved text."""
    if not in_prompt or not retrieved:
        return None
    at = retrieved.find(in_prompt)
    if at < 0:
        return None
    cut = at + len(in_prompt)
    pieces = [Piece(retrieved[:cut]), Piece(retrieved[cut:], "lost")]
    if anchor is None or not 0 <= anchor[0] < anchor[1] <= len(retrieved):
        return pieces
    out, offset = [], 0
    for piece in pieces:
        lo, hi = offset, offset + len(piece.text)
        offset = hi
        a, b = max(lo, anchor[0]), min(hi, anchor[1])
        if a >= b:
            out.append(piece)
            continue
        marked = "lost_span" if piece.kind == "lost" else "span"
        out += [Piece(piece.text[: a - lo], piece.kind), Piece(piece.text[a - lo : b - lo], marked)]
        out.append(Piece(piece.text[b - lo :], piece.kind))
    return [p for p in out if p.text]


def location(entry: dict) -> tuple[int | None, int | None, str]:
    """Where to centre the prompt excerpt, the same choice as `citegate queue show`."""
    if entry.get("found_start") is not None:
        return entry["found_start"], entry["found_end"], "where the span was found"
    if entry.get("section_start") is not None:
        return entry["section_start"], entry["section_end"], "the cited chunk's section (the span is not in it)"
    if entry.get("context_start") is not None:
        return entry["context_start"], entry["context_end"], "the context block (the cited chunk is not in it)"
    return None, None, "no location in the prompt (the context block was not found)"


def prompt_pieces(entry: dict) -> tuple[list[Piece], str]:
    """The normalized prompt around the location, the located part marked; the prompt's start when unlocated."""
    prompt = entry.get("prompt_normalized") or ""
    start, end, what = location(entry)
    if start is None or end is None:
        return _clip(prompt, 2 * CONTEXT_CHARS), what
    lo, hi = max(0, start - CONTEXT_CHARS), min(len(prompt), end + CONTEXT_CHARS)
    pieces = [Piece(f"… {lo:,} characters before … ", "gap")] if lo > 0 else []
    # the span itself is highlighted; a section or the whole context block only outlined
    kind = "span" if entry.get("found_start") is not None else "region"
    pieces += [Piece(prompt[lo:start]), Piece(prompt[start:end], kind), Piece(prompt[end:hi])]
    if hi < len(prompt):
        pieces.append(Piece(f" … {len(prompt) - hi:,} characters after …", "gap"))
    return pieces, what
