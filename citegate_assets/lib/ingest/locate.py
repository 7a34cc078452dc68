"""Find each retrieved chunk in a prompt by its content (template `auto`): whole, as a cut-off prefix, or
as consecutive pieces separated by template text (a framework that re-split a long node).

Works on normalized text (N of the prompt and N of each chunk), so it is plain string search; no
dagster, duckdb or polars here: the serving-path guard uses it as it is. Header and position hints
near a located chunk ("Source 2:", "[2]", `index="2"`) only tell apart chunks of equal text and say
which chunk an answer means by a position.

lib/ingest/_locate.c does the same, step for step, in one compiled pass (~40 % less CPU a prompt: the search is
CPython's own, the rest was the interpreter); this Python path is its reference and runs where no C compiler built
it (tests/test_locate_compiled.py holds the two equal).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import NamedTuple

try:  # compiled at install when a C compiler is there (pyproject.toml ext-modules); the Python path below otherwise
    import citegate_assets.lib.ingest._locate as _compiled
except ImportError:  # pragma: no cover - where no compiler built it
    _compiled = None  # type: ignore[assignment]

MIN_PREFIX_CHARS = 40  # a shorter common start is too likely to be chance (boilerplate, a quoted question)
PROBE_CHARS = 24  # what of a chunk's continuation is sought after a piece ends
MAX_GAP_CHARS = 400  # template text allowed between two pieces of one chunk (headers, metadata lines)
HINT_WINDOW_CHARS = 120
_ID_WINDOW_CHARS = 200
# The lookahead names the first characters of the alternatives: re then skips every other start at once (~2.5x
# faster a search); tests/test_locate.py holds it equal to the pattern without it.
POSITION_HINT_FIRST = r"(?=[sdcpr\[i])"
_POSITION_HINT_ALTERNATIVES = (
    r"(?:(?:source|document|doc|chunk|passage|context|reference|ref)\s*#?\s*(\d{1,4})\b[^\w]{0,3}"
    r"|\[(\d{1,4})\]|index\s*=\s*[\"']?(\d{1,4})\b[^<>]*>(?:[^<>]{0,80}<[^<>]{0,40}>){0,3}[^<>]{0,10})\s*$"
)
_POSITION_HINT = re.compile(POSITION_HINT_FIRST + _POSITION_HINT_ALTERNATIVES, re.IGNORECASE)
_POSITIONAL_ID = re.compile(
    r"^\[?\s*(?:(?:source|document|doc|chunk|passage|context|reference|ref)\s*#?\s*)?(\d{1,4})\s*\]?:?$", re.IGNORECASE
)


class Region(NamedTuple):
    """A stretch [start, end) of the prompt that holds chunk text [chunk_from, chunk_to) (a tuple: the compiled path
    builds one for ~0.1 us)."""

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
    work: int = 0  # what the search cost, in characters (_Work)
    over_budget: bool = False  # the search stopped at its work budget: nothing is located, nothing can pass

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


# The work budget of one prompt's location, in characters scanned by a search or compared, each call counted as
# CALL_CHARS more: WORK_PER_CHAR for each character of the prompt searched and of the chunk texts, at least
# WORK_MIN. Ordinary prompts use a few percent of it (tests/test_locate_budget.py); a prompt that would need more
# is not located at all (Located.over_budget), so its citations are unverifiable, never passed on a guess.
WORK_PER_CHAR = 128
WORK_MIN = 32_000_000
CALL_CHARS = 32


def work_budget(prompt_chars: int, chunk_chars: int) -> int:
    return max(WORK_MIN, WORK_PER_CHAR * (prompt_chars + chunk_chars))


class _OverBudget(Exception):
    pass


class _Work:
    """What a location has cost so far, against its budget."""

    def __init__(self, budget: int):
        self.budget, self.spent = budget, 0

    def charge(self, chars: int, calls: int = 1) -> None:
        self.spent += chars + calls * CALL_CHARS
        if self.spent > self.budget:
            raise _OverBudget


class _Claimed:
    """The stretches of the prompt claimed by located chunks, merged, in order: which stretch holds a position,
    whether one overlaps a range, in log time."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        if start >= end:
            return
        i = bisect_left(self.ends, start)  # the first stretch that ends at or after start: it may merge
        j = bisect_right(self.starts, end)  # stretches from i to j touch [start, end)
        if i < j:
            start, end = min(start, self.starts[i]), max(end, self.ends[j - 1])
        self.starts[i:j], self.ends[i:j] = [start], [end]

    def end_of_stretch_holding(self, at: int) -> int | None:
        """The end of the claimed stretch that holds position at, if one does."""
        i = bisect_right(self.starts, at) - 1
        return self.ends[i] if i >= 0 and at < self.ends[i] else None

    def overlaps(self, start: int, end: int) -> bool:
        i = bisect_right(self.ends, start)  # the first stretch ending after start
        return i < len(self.starts) and self.starts[i] < end


def locate_chunks(prompt: str, chunks: list[tuple[str, str]], lo: int = 0, hi: int | None = None) -> Located:
    """chunks: (chunk_id, normalized text) in retrieved order; search prompt[lo:hi], within work_budget."""
    hi = len(prompt) if hi is None else hi
    budget = work_budget(max(0, hi - lo), sum(len(text) for _, text in chunks))
    if _compiled is not None:  # the same searches, charges and results as _locate, in one compiled pass
        return _located(*_compiled.locate(prompt, chunks, lo, hi, budget))
    work = _Work(budget)
    out = Located()
    try:
        _locate(_Search(prompt, lo, hi, work), chunks, out)
    except _OverBudget:
        out = Located(chunk_chars={chunk_id: len(text) for chunk_id, text in chunks}, over_budget=True)
    out.work = work.spent
    return out


def _located(
    regions: list[Region] | None,
    chunk_chars: dict[str, int],
    arrived_chars: dict[str, int] | None,
    truncated: set[str] | None,
    positions: dict[str, str] | None,
    spent: int,
    over_budget: bool,
) -> Located:
    """What _compiled.locate returns, as Located."""
    if over_budget or regions is None or arrived_chars is None or truncated is None or positions is None:
        return Located(chunk_chars=chunk_chars, over_budget=True, work=spent)
    return Located(regions, chunk_chars, arrived_chars, truncated, positions, work=spent)


def _locate(search: _Search, chunks: list[tuple[str, str]], out: Located) -> None:
    claimed = search.claimed
    pending: list[tuple[str, str]] = []
    groups: dict[str, list[str]] = {}
    for chunk_id, text in chunks:
        out.chunk_chars[chunk_id] = len(text)
        if text:
            groups.setdefault(text, []).append(chunk_id)
    openings: dict[str, int] = {}  # where each text's opening first stands: whole or cut, it is nowhere before
    for text, ids in groups.items():
        openings[text] = search.find(text[:MIN_PREFIX_CHARS], search.lo, search.hi)
        spots = search.occurrences(text, len(ids), openings[text]) if openings[text] >= 0 else []
        for chunk_id, start in search.assign(ids, spots):
            out.regions.append(Region(chunk_id, start, start + len(text), 0, len(text), "whole"))
            out.arrived_chars[chunk_id] = len(text)
            claimed.add(start, start + len(text))
        pending += [(i, text) for i in ids if i not in out.arrived_chars]
    # cut or re-split chunks: the longest match claims its stretch first, so a chunk that merely starts like
    # another one (same heading, same opening sentence) is not found inside the other's text
    pending = [(chunk_id, text) for chunk_id, text in pending if openings[text] >= 0]
    candidates = {chunk_id: search.pieces(text, openings[text]) for chunk_id, text in pending}
    texts = dict(pending)
    retried: set[str] = set()
    while candidates:
        search.work.charge(len(candidates) + sum(len(p) for p in candidates.values()))
        chunk_id, pieces = max(
            candidates.items(), key=lambda kv: (sum(e - s for s, e, _, _ in kv[1]), -len(texts[kv[0]]))
        )
        del candidates[chunk_id]
        if not pieces:
            break
        clear = search.until_overlap(pieces)
        if len(clear) < len(pieces):
            if chunk_id not in retried:  # part of its stretch went to a better match: look again, once
                retried.add(chunk_id)
                candidates[chunk_id] = search.pieces(texts[chunk_id], openings[texts[chunk_id]])
                continue
            if not clear:
                continue
            pieces = clear
        text = texts[chunk_id]
        for ps, pe, _, _ in pieces:
            claimed.add(ps, pe)
        search.work.charge(len(pieces) * len(claimed.starts))
        how = "piece" if len(pieces) > 1 else "prefix"
        for start, end, cfrom, cto in pieces:
            out.regions.append(Region(chunk_id, start, end, cfrom, cto, how))
        covered = pieces[-1][3]
        out.arrived_chars[chunk_id] = covered
        if text[covered:].strip():
            out.truncated.add(chunk_id)
    out.regions.sort(key=lambda r: (r.start, r.end))
    search.work.charge(len(out.regions) * HINT_WINDOW_CHARS, len(out.regions))
    _read_position_hints(search.prompt, out, search.lo)


def positional_ref(cited_id: str) -> str | None:
    """ "2" for a cited id that names a position: "2", "[2]", "Source 2", "source 2:"; else None."""
    m = _POSITIONAL_ID.match(cited_id.strip())
    return m.group(1).lstrip("0") or "0" if m else None


MAX_OPENINGS = 16  # places of a chunk's opening followed one by one before a binary search takes over
COMPARE_BLOCK_CHARS = 64  # the first block common_prefix compares
HEAD_CHARS = 64  # str.find of a needle this short skips faster than its two-way search of a whole chunk
HEAD_TRIES = 8  # heads that start no whole match before the whole needle is sought (bounds the worst case)


def find_text(prompt: str, text: str, at: int = 0, hi: int | None = None, work: _Work | None = None) -> int:
    """prompt.find(text, at, hi): the first place its head stands, checked whole, about twice as fast on chunks.
    With work, each search is charged what it may scan (up to the match, or hi) and each check its length."""
    if hi is None:
        hi = len(prompt)
    if work is None and _compiled is not None:
        return _compiled.find(prompt, text, at, hi)
    if len(text) <= HEAD_CHARS:
        found = prompt.find(text, at, hi)
        if work is not None:
            work.charge(max(0, (found + len(text) if found >= 0 else hi) - at))
        return found
    head = text[:HEAD_CHARS]
    for _ in range(HEAD_TRIES):
        found = prompt.find(head, at, hi)
        if work is not None:
            work.charge(max(0, (found + HEAD_CHARS if found >= 0 else hi) - at) + (len(text) if found >= 0 else 0))
        if found < 0 or prompt.startswith(text, found, hi):
            return found
        at = found + 1
    found = prompt.find(text, at, hi)
    if work is not None:
        work.charge(max(0, (found + len(text) if found >= 0 else hi) - at))
    return found


class _Search:
    """prompt[lo:hi] searched for chunk texts, each search and comparison charged to work."""

    def __init__(self, prompt: str, lo: int, hi: int, work: _Work):
        self.prompt, self.lo, self.hi, self.work = prompt, lo, hi, work
        self.claimed = _Claimed()

    def find(self, needle: str, at: int, hi: int) -> int:
        return find_text(self.prompt, needle, at, hi, self.work)

    def occurrences(self, text: str, want: int, at: int) -> list[int]:
        """The first `want` places of text, not overlapping, from at: where its opening first stands (so a
        chunk that stands there whole, the usual case, needs no second search)."""
        spots: list[int] = []
        self.work.charge(len(text))
        if self.prompt.startswith(text, at, self.hi):
            spots.append(at)
            at += max(1, len(text))
        else:
            at += 1
        while len(spots) < want:
            found = self.find(text, at, self.hi)
            if found < 0:
                break
            spots.append(found)
            at = found + max(1, len(text))
        return spots

    def assign(self, ids: list[str], spots: list[int]) -> list[tuple[str, int]]:
        """Chunks of equal text to their occurrences: an id written just before an occurrence wins, then retrieved
        order."""
        if len(ids) == 1:
            return [(ids[0], spots[0])] if spots else []
        self.work.charge(len(spots) * len(ids) * _ID_WINDOW_CHARS, len(spots) * len(ids))
        free = list(ids)
        pairs: list[tuple[str | None, int]] = []
        for spot in spots:
            window = self.prompt[max(self.lo, spot - _ID_WINDOW_CHARS) : spot]
            named = [i for i in free if i in window]
            chosen = max(named, key=window.rfind) if named else None
            if chosen is not None:
                free.remove(chosen)
                pairs.append((chosen, spot))
            else:
                pairs.append((None, spot))
        return [(i if i is not None else free.pop(0), s) for i, s in pairs if i is not None or free]

    def find_free(self, needle: str, at: int, hi: int) -> int:
        """The first occurrence of needle in [at, hi) that starts in no claimed stretch: a search per claimed
        stretch at most, each resuming where the stretch holding the last occurrence ends."""
        while True:
            found = self.find(needle, at, hi)
            if found < 0:
                return found
            end = self.claimed.end_of_stretch_holding(found)
            if end is None:
                return found
            at = end

    def until_overlap(self, pieces: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
        """The leading pieces that overlap no stretch already claimed by another chunk."""
        self.work.charge(0, len(pieces))
        for n, (ps, pe, _, _) in enumerate(pieces):
            if self.claimed.overlaps(ps, pe):
                return pieces[:n]
        return pieces

    def pieces(self, text: str, at: int) -> list[tuple[int, int, int, int]]:
        """The longest prefix of text found (outside whole chunks) from at on, then its continuations after short
        gaps."""
        prompt, hi = self.prompt, self.hi
        if len(text) < MIN_PREFIX_CHARS:
            return []
        good, start = self.longest_prefix(text, at)
        if start < 0:
            return []
        pieces = [(start, start + good, 0, good)]
        at_prompt, at_chunk = start + good, good
        while True:
            c = at_chunk
            while c < len(text) and text[c] == " ":
                c += 1
            probe = text[c : c + PROBE_CHARS]
            if len(probe) < min(PROBE_CHARS, len(text) - c) or len(probe) < 8:
                break
            q = self.find_free(probe, at_prompt, min(hi, at_prompt + MAX_GAP_CHARS + len(probe)))
            if q < 0:
                break
            b, cb = q, c
            while b > at_prompt and cb > 0 and prompt[b - 1] == text[cb - 1]:  # overlap with the previous piece
                b, cb = b - 1, cb - 1
            e = q + len(probe) + self.common_prefix(q + len(probe), text, c + len(probe))
            ce = c + (e - q)
            self.work.charge(q - b)
            pieces.append((b, e, cb, ce))
            at_prompt, at_chunk = e, ce
            if ce >= len(text):
                break
        return pieces

    def longest_prefix(self, text: str, at: int) -> tuple[int, int]:
        """(good, start): the longest prefix text[:good] (at least MIN_PREFIX_CHARS) that starts in no claimed
        stretch, and the first place it does; start -1 if none does. The first MAX_OPENINGS places of text's
        opening are each followed as far as they match text; past them, a binary search over prefix lengths
        (each a search of the prompt) finds the answer in a bounded number of searches however often it recurs."""
        opening = text[:MIN_PREFIX_CHARS]
        good, start = 0, -1
        for _ in range(MAX_OPENINGS):
            found = self.find_free(opening, at, self.hi)
            if found < 0:
                return good, start
            length = MIN_PREFIX_CHARS + self.common_prefix(found + MIN_PREFIX_CHARS, text, MIN_PREFIX_CHARS)
            if length > good:
                good, start = length, found
            at = found + 1
        bad = len(text)  # text[:good] is found, text[:bad] is not (it is not found whole)
        while bad - good > 1:
            mid = (good + bad) // 2
            # a longer prefix stands only where a shorter one does: from the first free place of text[:good] on
            found = self.find_free(text[:mid], start, self.hi)
            if found >= 0:
                good, start = mid, found
            else:
                bad = mid
        return good, start

    def common_prefix(self, i: int, b: str, j: int) -> int:
        """Length of the longest common prefix of prompt[i:hi] and b[j:]: compared in blocks that double while
        they match, then a binary search in the block that does not (charged what is compared)."""
        limit = min(self.hi - i, len(b) - j)
        good, block = 0, COMPARE_BLOCK_CHARS
        while good < limit:
            size = min(block, limit - good)
            self.work.charge(size)
            if not self.prompt.startswith(b[j + good : j + good + size], i + good):
                break
            good, block = good + size, block * 2
        else:
            return good
        bad = good + size  # prompt[i:i+good] matches, prompt[i:i+bad] does not
        while bad - good > 1:
            mid = (good + bad) // 2
            self.work.charge(mid - good)
            if self.prompt.startswith(b[j + good : j + mid], i + good):
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


if _compiled is not None:
    _compiled.configure(
        MIN_PREFIX_CHARS,
        PROBE_CHARS,
        MAX_GAP_CHARS,
        HINT_WINDOW_CHARS,
        _ID_WINDOW_CHARS,
        CALL_CHARS,
        MAX_OPENINGS,
        COMPARE_BLOCK_CHARS,
        HEAD_CHARS,
        HEAD_TRIES,
        _POSITION_HINT,
        Region,
    )
