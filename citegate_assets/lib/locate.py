"""Find each retrieved chunk in a prompt by its content (template `auto`): whole, as a cut-off prefix, or
as consecutive pieces separated by template text (a framework that re-split a long node).

Works on normalized text (N of the prompt and N of each chunk), so it is plain string search; no
dagster, duckdb or polars here: the serving-path guard uses it as it is. Header and position hints
near a located chunk ("Source 2:", "[2]", `index="2"`) only tell apart chunks of equal text and say
which chunk an answer means by a position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MIN_PREFIX_CHARS = 40  # a shorter common start is too likely to be chance (boilerplate, a quoted question)
PROBE_CHARS = 24  # what of a chunk's continuation is sought after a piece ends
MAX_GAP_CHARS = 400  # template text allowed between two pieces of one chunk (headers, metadata lines)
HINT_WINDOW_CHARS = 120
_ID_WINDOW_CHARS = 200
_POSITION_HINT = re.compile(
    r"(?:(?:source|document|doc|chunk|passage|context|reference|ref)\s*#?\s*(\d{1,4})\b[^\w]{0,3}"
    r"|\[(\d{1,4})\]|index\s*=\s*[\"']?(\d{1,4})\b[^<>]*>(?:[^<>]{0,80}<[^<>]{0,40}>){0,3}[^<>]{0,10})\s*$",
    re.IGNORECASE,
)
_POSITIONAL_ID = re.compile(
    r"^\[?\s*(?:(?:source|document|doc|chunk|passage|context|reference|ref)\s*#?\s*)?(\d{1,4})\s*\]?:?$", re.IGNORECASE
)


@dataclass(frozen=True)
class Region:
    """A stretch [start, end) of the prompt that holds chunk text [chunk_from, chunk_to)."""

    chunk_id: str
    start: int
    end: int
    chunk_from: int
    chunk_to: int
    how: str  # whole | prefix | piece
    header_ref: str | None = None  # a position header right before it ("2" for "Source 2:")


@dataclass
class Located:
    regions: list[Region] = field(default_factory=list)  # in prompt order
    chunk_chars: dict[str, int] = field(default_factory=dict)
    arrived_chars: dict[str, int] = field(default_factory=dict)  # how much of each located chunk reached the prompt
    truncated: set[str] = field(default_factory=set)
    positions: dict[str, str] = field(default_factory=dict)  # "2" -> the chunk an answer's "[2]" / "Source 2" means

    @property
    def context(self) -> tuple[int, int] | None:
        if not self.regions:
            return None
        return min(r.start for r in self.regions), max(r.end for r in self.regions)

    def found(self, chunk_id: str) -> str:
        """whole | cut | pieces | missing"""
        mine = [r for r in self.regions if r.chunk_id == chunk_id]
        if not mine:
            return "missing"
        if chunk_id in self.truncated:
            return "cut"
        return "pieces" if len(mine) > 1 else "whole"


def locate_chunks(prompt: str, chunks: list[tuple[str, str]], lo: int = 0, hi: int | None = None) -> Located:
    """chunks: (chunk_id, normalized text) in retrieved order; search prompt[lo:hi]."""
    hi = len(prompt) if hi is None else hi
    out = Located()
    claimed: list[tuple[int, int]] = []
    pending: list[tuple[str, str]] = []
    groups: dict[str, list[str]] = {}
    for chunk_id, text in chunks:
        out.chunk_chars[chunk_id] = len(text)
        if text:
            groups.setdefault(text, []).append(chunk_id)
    for text, ids in groups.items():
        spots = _occurrences(prompt, text, lo, hi, len(ids))
        for chunk_id, start in _assign(prompt, ids, spots, lo):
            out.regions.append(Region(chunk_id, start, start + len(text), 0, len(text), "whole"))
            out.arrived_chars[chunk_id] = len(text)
            claimed.append((start, start + len(text)))
        pending += [(i, text) for i in ids if i not in out.arrived_chars]
    # cut or re-split chunks: the longest match claims its stretch first, so a chunk that merely starts like
    # another one (same heading, same opening sentence) is not found inside the other's text
    candidates = {chunk_id: _pieces(prompt, text, lo, hi, claimed) for chunk_id, text in pending}
    texts = dict(pending)
    retried: set[str] = set()
    while candidates:
        chunk_id, pieces = max(
            candidates.items(), key=lambda kv: (sum(e - s for s, e, _, _ in kv[1]), -len(texts[kv[0]]))
        )
        del candidates[chunk_id]
        if not pieces:
            break
        clear = _until_overlap(pieces, claimed)
        if len(clear) < len(pieces):
            if chunk_id not in retried:  # part of its stretch went to a better match: look again, once
                retried.add(chunk_id)
                candidates[chunk_id] = _pieces(prompt, texts[chunk_id], lo, hi, claimed)
                continue
            if not clear:
                continue
            pieces = clear
        text = texts[chunk_id]
        claimed.extend((ps, pe) for ps, pe, _, _ in pieces)
        how = "piece" if len(pieces) > 1 else "prefix"
        for start, end, cfrom, cto in pieces:
            out.regions.append(Region(chunk_id, start, end, cfrom, cto, how))
        covered = pieces[-1][3]
        out.arrived_chars[chunk_id] = covered
        if text[covered:].strip():
            out.truncated.add(chunk_id)
    out.regions.sort(key=lambda r: (r.start, r.end))
    _read_position_hints(prompt, out, lo)
    return out


def positional_ref(cited_id: str) -> str | None:
    """ "2" for a cited id that names a position: "2", "[2]", "Source 2", "source 2:"; else None."""
    m = _POSITIONAL_ID.match(cited_id.strip())
    return m.group(1).lstrip("0") or "0" if m else None


def _until_overlap(
    pieces: list[tuple[int, int, int, int]], claimed: list[tuple[int, int]]
) -> list[tuple[int, int, int, int]]:
    """The leading pieces that overlap no stretch already claimed by another chunk."""
    for n, (ps, pe, _, _) in enumerate(pieces):
        if any(s < pe and ps < e for s, e in claimed):
            return pieces[:n]
    return pieces


def _occurrences(prompt: str, text: str, lo: int, hi: int, want: int) -> list[int]:
    spots: list[int] = []
    at = lo
    while len(spots) < want:
        found = find_text(prompt, text, at, hi)
        if found < 0:
            break
        spots.append(found)
        at = found + max(1, len(text))
    return spots


HEAD_CHARS = 64  # str.find of a needle this short skips faster than its two-way search of a whole chunk
HEAD_TRIES = 8  # heads that start no whole match before the whole needle is sought (bounds the worst case)


def find_text(prompt: str, text: str, at: int = 0, hi: int | None = None) -> int:
    """prompt.find(text, at, hi): the first place its head stands, checked whole, about twice as fast on chunks."""
    if hi is None:
        hi = len(prompt)
    if len(text) <= HEAD_CHARS:
        return prompt.find(text, at, hi)
    head = text[:HEAD_CHARS]
    for _ in range(HEAD_TRIES):
        found = prompt.find(head, at, hi)
        if found < 0 or prompt.startswith(text, found, hi):
            return found
        at = found + 1
    return prompt.find(text, at, hi)


def _assign(prompt: str, ids: list[str], spots: list[int], lo: int) -> list[tuple[str, int]]:
    """Chunks of equal text to their occurrences: an id written just before an occurrence wins, then retrieved order."""
    if len(ids) == 1:
        return [(ids[0], spots[0])] if spots else []
    free = list(ids)
    pairs: list[tuple[str | None, int]] = []
    for spot in spots:
        window = prompt[max(lo, spot - _ID_WINDOW_CHARS) : spot]
        named = [i for i in free if i in window]
        chosen = max(named, key=window.rfind) if named else None
        if chosen is not None:
            free.remove(chosen)
            pairs.append((chosen, spot))
        else:
            pairs.append((None, spot))
    return [(i if i is not None else free.pop(0), s) for i, s in pairs if i is not None or free]


def _find_free(prompt: str, needle: str, lo: int, hi: int, claimed: list[tuple[int, int]]) -> int:
    at = lo
    while True:
        found = find_text(prompt, needle, at, hi)
        if found < 0 or not any(s <= found < e for s, e in claimed):
            return found
        at = found + 1


def _pieces(prompt: str, text: str, lo: int, hi: int, claimed) -> list[tuple[int, int, int, int]]:
    """The longest prefix of text found (outside whole chunks), then its continuations after short gaps."""
    if len(text) < MIN_PREFIX_CHARS or _find_free(prompt, text[:MIN_PREFIX_CHARS], lo, hi, claimed) < 0:
        return []
    good, bad = MIN_PREFIX_CHARS, len(text)  # text[:good] is found, text[:bad] is not (it is not found whole)
    while bad - good > 1:
        mid = (good + bad) // 2
        if _find_free(prompt, text[:mid], lo, hi, claimed) >= 0:
            good = mid
        else:
            bad = mid
    start = _find_free(prompt, text[:good], lo, hi, claimed)
    pieces = [(start, start + good, 0, good)]
    at_prompt, at_chunk = start + good, good
    while True:
        c = at_chunk
        while c < len(text) and text[c] == " ":
            c += 1
        probe = text[c : c + PROBE_CHARS]
        if len(probe) < min(PROBE_CHARS, len(text) - c) or len(probe) < 8:
            break
        q = _find_free(prompt, probe, at_prompt, min(hi, at_prompt + MAX_GAP_CHARS + len(probe)), claimed)
        if q < 0:
            break
        b, cb = q, c
        while b > at_prompt and cb > 0 and prompt[b - 1] == text[cb - 1]:  # overlap with the previous piece
            b, cb = b - 1, cb - 1
        e = q + len(probe) + _common_prefix(prompt, q + len(probe), hi, text, c + len(probe))
        ce = c + (e - q)
        pieces.append((b, e, cb, ce))
        at_prompt, at_chunk = e, ce
        if ce >= len(text):
            break
    return pieces


def _common_prefix(a: str, i: int, a_end: int, b: str, j: int) -> int:
    """Length of the longest common prefix of a[i:a_end] and b[j:] (binary search over startswith)."""
    good, bad = 0, min(a_end - i, len(b) - j) + 1
    while bad - good > 1:
        mid = (good + bad) // 2
        if a.startswith(b[j : j + mid], i):
            good = mid
        else:
            bad = mid
    return good


def _read_position_hints(prompt: str, out: Located, lo: int) -> None:
    previous_end = lo
    regions = []
    for r in out.regions:
        window = prompt[max(previous_end, r.start - HINT_WINDOW_CHARS) : r.start]
        m = _POSITION_HINT.search(window)
        ref = next((g for g in m.groups() if g), None) if m else None
        header_ref = ref.lstrip("0") or "0" if ref else None
        # the same region when nothing changes (regions are frozen): building one costs more than the search
        same = header_ref == r.header_ref
        regions.append(r if same else Region(r.chunk_id, r.start, r.end, r.chunk_from, r.chunk_to, r.how, header_ref))
        previous_end = max(previous_end, r.end)
    out.regions = regions
    if any(r.header_ref for r in regions):
        for r in regions:
            if r.header_ref and r.header_ref not in out.positions:
                out.positions[r.header_ref] = r.chunk_id
    else:  # no header names positions: the N-th chunk region in the prompt
        for n, r in enumerate(regions, 1):
            out.positions.setdefault(str(n), r.chunk_id)
