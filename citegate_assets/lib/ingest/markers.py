"""Inline citation markers in an answer (docs/log-format.md): `...moved to St. Louis [1][5].` becomes one citation
per (sentence, cited reference), its claim the sentence with the markers removed.

Plain Python, no polars, duckdb or dagster: ingest (lib/ingest/citation_rows.py) and the call-time guard (guard.py)
both read an answer with `read_markers`, and resolve what each marker names with `MarkerRefs`, so both give the same
citations.

What counts as a marker (the built-in styles; a surface's `citation_marker` regex replaces them):
- a bracket group `[1]`, `[1, 3]`, `[1-3]` (a range of at most MAX_RANGE numbers), `[Source 2]`, `[^1]` (a
  footnote reference: its definition `[^1]: ...` may name the source, else the number is the reference), a
  lenticular group `【1】` / `【1†source】`, a parenthesized `(Source 2)` / `(Sources 1, 3)`, and a bracketed chunk id
  (`[kb#3]`, `[doc-12]`) that is an id of this call's chunks or of the prompt's headers, or has the same shape
  (the same text with other digits: `[kb#9]` next to `kb#1`..`kb#5`, which is then `fabricated_id`);
- a number of 4 or more digits (`[2019]`), or 0 (`[0, 1]`), only when it names a chunk: a year, a quantity or an
  interval in brackets is text;
- not a marker: anything in fenced or inline code, a Markdown link or image `[text](url)`, a bare URL, a
  bracketed word (`[sic]`, `[x]`), and a bracket the answer copied with the chunk text around it (the chunk holds
  `[3]` as a reference of its own: the marker with the words before it in its sentence stands in a chunk).

Sentences: a blank line, a heading, a list item, a block quote line and a table row each start a new block, and a
line break does too unless the next line goes on in lower case. A block splits after `.`, `!`, `?` (and `。！？`)
followed by space and no lower-case word, and after a lead-in's colon followed by a capital ("Based on the sources:
The ..."), except after an abbreviation ("St. Louis", "Dr.", "e.g.", "U.S.", "No. 5") unless a marker follows it;
decimals never split. A marker at the start of a sentence in running text, or alone on a line, belongs to the
sentence before it; a line that opens with a marker and goes on with a sentence ("[2] Support is around the
clock.") cites that sentence. Not claims: footnote and link definitions, a "Sources:"/"References:" section (to the
end of the answer), a line that opens with such a label and a colon ("Sources: [1], [3]"), and a trailing
reference list ("[1] Refund policy (refunds.md)").
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from citegate_assets.lib.ingest.sentences import sentence_ends

MAX_RANGE = 20  # "[1-3]" expands; a wider range ("[1-100]") is not a citation
MAX_MARKERS = 2000  # more in one answer is no answer a model wrote: refused (TooManyMarkers), never cut short
QUOTE_CONTEXT_CHARS = 80  # the words before a marker that must stand in a chunk for it to be the chunk's own
MIN_QUOTE_CHARS = 12  # ... at least this many: a short lead-in ("Yes [3]") is no quote

_SOURCE_WORDS = (
    r"(?:sources?|documents?|docs?|passages?|chunks?|contexts?|references?|refs?|citations?|search\s+results?)"
)
_LABEL = rf"(?:{_SOURCE_WORDS}|id)\s*[.:#=]?\s*"  # "Source 2", "doc #2", "source: kb#3", "id=kb#3"
_NUMBER_ITEM = re.compile(rf"(?:{_LABEL})?(?P<a>\d{{1,6}})(?:\s*[-\u2010-\u2015]\s*(?P<b>\d{{1,6}}))?", re.IGNORECASE)
_LABELLED_ID = re.compile(rf"{_LABEL}(?P<id>\S+)", re.IGNORECASE)
_DEFINITION_NUMBER = re.compile(rf"^\W*(?P<a>\d{{1,6}})\b|{_SOURCE_WORDS}\.?\s*#?\s*(?P<b>\d{{1,6}})\b", re.I)
_ID_ITEM = re.compile(r"[A-Za-z0-9][\w.#:/@+~-]{0,119}")
_BRACKET = re.compile(r"(?<![\\!])\[\s*(?P<body>[^\[\]\n]{1,160}?)\s*\](?!\()")
_LENTICULAR = re.compile(r"\u3010\s*(?P<body>[^\u3010\u3011\n]{1,60}?)\s*\u3011")
_PAREN = re.compile(
    rf"\(\s*(?P<body>{_SOURCE_WORDS}\.?\s*#?\s*\d{{1,6}}"
    rf"(?:\s*(?:,|;|and|&)\s*(?:{_SOURCE_WORDS}\.?\s*#?\s*)?\d{{1,6}})*)\s*\)",
    re.IGNORECASE,
)
_SPLIT_ITEMS = re.compile(r"\s*(?:[,;]|\band\b|&)\s*", re.IGNORECASE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_BACKTICKS = re.compile(r"`+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_LINK = re.compile(r"!?\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]\([^()\s]*(?:\([^()\s]*\)[^()\s]*)*(?:\s+\"[^\"\n]*\")?\)")
_URL = re.compile(r"<?https?://[^\s<>\"\[\]]+>?")  # "https://x.example/a[1]": the marker is not the URL's
_FOOTNOTE_DEF = re.compile(r"^\s*\[\^(?P<label>[^\]\s]+)\]:\s*(?P<text>.*)$")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*\S+")
_SOURCES_LABEL = re.compile(
    r"^\s*(?:#{1,6}\s*)?[*_]*\s*(?:sources?|references?|citations?|bibliography|works\s+cited|footnotes|"
    r"sources\s+used|cited\s+sources)\s*[*_]*\s*(?P<colon>:)?\s*[*_]*\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_LIST_OF_MARKERS = re.compile(r"\[[^\[\]\n]*\]|\u3010[^\u3010\u3011\n]*\u3011|\([^()\n]*\)|\band\b", re.I)
_QUOTE = re.compile(r"^\s{0,3}(?:>\s?)+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_BULLET = re.compile(r"^(?P<indent>\s*)(?:[-*+\u2022\u2023\u25e6]|\d{1,3}[.)])\s+")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_CONTENT = re.compile(r"[^\W\d_]{2,}|\d")
_LEAD_WORDS = frozenset(
    "see cf also and or source sources reference references citation citations ref refs doc docs".split()
)
_SPACE = re.compile(r"\s+")
_LEAD_ONLY = re.compile(r"\(\s*(?:see|cf\.?|see also|sources?:?)\s*\)", re.IGNORECASE)  # "(see [2])" less its marker
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;]?\s*\)|\[\s*\]")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([.,;:!?\u3002\uff01\uff1f])")


class TooManyMarkers(ValueError):
    """An answer with more markers than MAX_MARKERS: its citations are not read (an answer reject, not a guess)."""


@dataclass(frozen=True)
class Marker:
    """One marker as written: where it stands in the answer and what it cites."""

    start: int
    end: int
    cited_as: str
    refs: tuple[tuple[str, str], ...]  # (kind, ref): ("number", "3") or ("id", "kb#3")


@dataclass(frozen=True)
class MarkerCitation:
    kind: str  # number | id
    ref: str  # "3" or "kb#3": what the marker names, resolved by MarkerRefs
    cited_as: str  # the marker as written: "[1-3]", "【2】", "(Source 2)"
    claim: str  # the sentence with every marker removed, whitespace collapsed
    sentence_no: int
    offset: int  # the marker's place in the answer


@dataclass
class MarkerRefs:
    """What a call's markers may name: the prompt's numbered headers and header labels (layout positions), the
    retrieved chunk ids, and the retrieved chunks by rank that have no section in the prompt."""

    positions: dict[str, str] = field(default_factory=dict)  # "2" or a header label -> chunk id
    retrieved: set[str] = field(default_factory=set)
    absent_by_rank: dict[str, str] = field(default_factory=dict)  # "5" -> the rank-5 chunk, not in the prompt
    ids: set[str] = field(init=False)  # what a bracketed chunk id may name: retrieved ids and header labels
    shapes: set[str] = field(init=False)  # their shapes (digits as 0), for an id of the same form

    def __post_init__(self) -> None:
        self.ids = self.retrieved | {k for k in self.positions if not k.isdigit()}
        self.shapes = {_shape(i) for i in self.ids if any(ch.isdigit() for ch in i)}

    def resolve(self, kind: str, ref: str) -> str | None:
        """The chunk a marker names, or None (then it is cited as written: `fabricated_id`). A number: the
        prompt's header of that number (or, with no numbered header, the N-th chunk in the prompt), else a chunk of
        that id, else the retrieved chunk of that rank that never reached the prompt (`dropped_before_prompt`)."""
        if kind == "number":
            for table in (self.positions, self.absent_by_rank):
                if ref in table:
                    return table[ref]
            return ref if ref in self.retrieved else None
        if ref in self.retrieved:
            return ref
        return self.positions.get(ref)

    def knows_number(self, number: str) -> bool:
        return self.resolve("number", number) is not None

    def is_id(self, token: str) -> bool:
        return token in self.ids or (any(ch.isdigit() for ch in token) and _shape(token) in self.shapes)


def _shape(text: str) -> str:
    return re.sub(r"\d+", "0", text)


def _number(text: str) -> str:
    return text.lstrip("0") or "0"


def _items(body: str, refs: MarkerRefs) -> tuple[tuple[str, str], ...] | None:
    """The references of a bracket's body, or None when it is no marker (one item that names nothing)."""
    out: list[tuple[str, str]] = []
    items = [item for item in _SPLIT_ITEMS.split(body.strip()) if item]  # "1, 2, and 3": no empty item between
    if not items:
        return None
    for item in items:
        m = _NUMBER_ITEM.fullmatch(item)
        if m:
            a = int(m["a"])
            b = int(m["b"]) if m["b"] else a
            if b < a or b - a >= MAX_RANGE:
                return None
            for n in range(a, b + 1):
                ref = str(n)
                if (len(m["a"]) >= 4 or n == 0) and not refs.knows_number(ref):
                    return None  # a year, a quantity or an interval ("[0, 1]"), not a chunk
                out.append(("number", ref))
            continue
        if _ID_ITEM.fullmatch(item) and refs.is_id(item):
            out.append(("id", item))
            continue
        labelled = _LABELLED_ID.fullmatch(item)
        if labelled and _ID_ITEM.fullmatch(labelled["id"]) and refs.is_id(labelled["id"]):
            out.append(("id", labelled["id"]))
            continue
        return None
    return tuple(out) or None


def _custom_refs(ref: str, refs: MarkerRefs) -> tuple[tuple[str, str], ...]:
    """A surface pattern's `ref`: numbers (a list or range) when it reads as such, else one chunk id as written."""
    parsed = _items(ref, refs) if ref.strip() else None
    if parsed and all(kind == "number" for kind, _ in parsed):
        return parsed
    return (("number" if ref.strip().isdigit() else "id", _number(ref.strip()) if ref.strip().isdigit() else ref),)


def _footnote_refs(label: str, definitions: dict[str, str], refs: MarkerRefs) -> tuple[tuple[str, str], ...] | None:
    """A footnote reference names what its definition names ("[^1]: Source 3", "[^2]: kb#4"), else its number."""
    text = definitions.get(label)
    if text is not None:
        for pattern in (_BRACKET, _LENTICULAR, _PAREN):
            m = pattern.search(text)
            if m and (found := _items(m["body"], refs)):
                return found
        for word in text.split():  # "[^2]: see kb#3", "[^1]: Source 3"
            word = word.strip(".,;:()")
            if word and not word.isdigit() and (found := _items(word, refs)):
                return found
        if m := _DEFINITION_NUMBER.search(text):  # "[^1]: 3. Refund policy", "[^1]: from Document 3"
            if found := _items(m["a"] or m["b"], refs):
                return found
    if label.isdigit():
        return (("number", _number(label)),)
    return None


class _Spans:
    """Sorted, disjoint stretches of the answer (code, links, URLs): is a position inside one."""

    def __init__(self, spans: Iterable[tuple[int, int]]):
        merged: list[list[int]] = []
        for s, e in sorted(spans):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]

    def holds(self, at: int) -> bool:
        i = bisect_right(self.starts, at) - 1
        return i >= 0 and at < self.ends[i]


@dataclass
class _Line:
    start: int  # of its content (after a bullet, heading marks or a table's outer pipe)
    end: int
    kind: str  # text | item | heading | row | skip
    indent: int


def _lines(answer: str) -> tuple[list[_Line], list[tuple[int, int]], dict[str, str]]:
    """Each line classified; the fenced code stretches; the footnote definitions (label -> text)."""
    lines: list[_Line] = []
    code: list[tuple[int, int]] = []
    definitions: dict[str, str] = {}
    fence: str | None = None
    fence_start = 0
    in_sources = False
    at = 0
    for raw in answer.splitlines(keepends=True):
        start, text = at, raw.rstrip("\r\n")
        at += len(raw)
        end = start + len(text)
        m = _FENCE.match(text)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
                code.append((fence_start, end))
            lines.append(_Line(start, end, "skip", 0))
            continue
        if m:
            fence, fence_start = m.group(1), start
            lines.append(_Line(start, end, "skip", 0))
            continue
        if in_sources or not text.strip():
            lines.append(_Line(start, end, "skip" if in_sources else "blank", 0))
            continue
        if fd := _FOOTNOTE_DEF.match(text):
            definitions[fd["label"]] = fd["text"]
            lines.append(_Line(start, end, "skip", 0))
            continue
        label = _SOURCES_LABEL.match(text)
        if label and not label["rest"].strip(" *_:"):
            in_sources = True  # a "Sources:" heading: the rest of the answer lists them
            lines.append(_Line(start, end, "skip", 0))
            continue
        if label and (label["colon"] or not _LIST_OF_MARKERS.sub("", label["rest"]).strip(" *_:,;.&")):
            lines.append(_Line(start, end, "skip", 0))  # "Sources: [1] refunds.md; [2] ...": what was used, no claim
            continue
        if _LINK_DEF.match(text) or _TABLE_SEPARATOR.match(text) and "-" in text:
            lines.append(_Line(start, end, "skip", 0))
            continue
        indent = len(text) - len(text.lstrip())
        if q := _QUOTE.match(text):  # a block quote: its text, without the ">"
            start, text, indent = start + q.end(), text[q.end() :], 0
        if h := _HEADING.match(text):
            lines.append(_Line(start + h.end(), end, "heading", indent))
        elif b := _BULLET.match(text):
            lines.append(_Line(start + b.end(), end, "item", indent))
        elif text.lstrip().startswith("|"):
            stripped = text.rstrip()
            last = len(stripped) - 1 if stripped.endswith("|") and len(stripped.strip()) > 1 else len(text)
            lines.append(_Line(start + text.index("|") + 1, start + last, "row", indent))
        else:
            lines.append(_Line(start + indent, end, "text", indent))
    if fence is not None:  # an unclosed fence runs to the end
        code.append((fence_start, len(answer)))
    return lines, code, definitions


def _inline_code(answer: str) -> list[tuple[int, int]]:
    """Inline code spans: a run of backticks closed by the next run of the same length, within the paragraph. Found
    with one pass over the runs and a binary search per opener (a regex would try every later run: quadratic)."""
    runs = [(m.start(), m.end() - m.start()) for m in _BACKTICKS.finditer(answer)]
    by_length: dict[int, list[int]] = {}
    for start, length in runs:
        by_length.setdefault(length, []).append(start)
    blanks = [m.start() for m in _BLANK_LINE.finditer(answer)]
    spans: list[tuple[int, int]] = []
    after = 0
    for start, length in runs:
        if start < after:
            continue  # inside a span already closed
        same = by_length[length]
        k = bisect_right(same, start)
        if k == len(same):
            continue
        close = same[k]
        if bisect_right(blanks, start) != bisect_right(blanks, close):
            continue  # a blank line between: no span
        spans.append((start, close + length))
        after = close + length
    return spans


def _find_markers(
    answer: str,
    protected: _Spans,
    pattern: re.Pattern[str] | None,
    definitions: dict[str, str],
    refs: MarkerRefs,
) -> list[Marker]:
    found: list[Marker] = []
    if pattern is not None:
        for m in pattern.finditer(answer):
            if m.end() > m.start() and not protected.holds(m.start()):
                found.append(Marker(m.start(), m.end(), m.group(0), _custom_refs(m.group("ref") or "", refs)))
            if len(found) > MAX_MARKERS:
                raise TooManyMarkers(f"the answer holds more than {MAX_MARKERS} citation markers")
        return found
    for regex in (_BRACKET, _LENTICULAR, _PAREN):
        for m in regex.finditer(answer):
            if protected.holds(m.start()):
                continue
            body = m["body"]
            parsed: tuple[tuple[str, str], ...] | None
            if regex is _BRACKET and body.startswith("^"):
                parsed = _footnote_refs(body[1:].strip(), definitions, refs)
            elif regex is _LENTICULAR:
                parsed = _items(body.split("\u2020")[0], refs)
            else:
                parsed = _items(body, refs)
            if parsed:
                found.append(Marker(m.start(), m.end(), m.group(0), parsed))
            if len(found) > MAX_MARKERS:
                raise TooManyMarkers(f"the answer holds more than {MAX_MARKERS} citation markers")
    found.sort(key=lambda mk: mk.start)
    # a (Source 2) inside a bracket group already read, or overlapping: the first wins
    out: list[Marker] = []
    for mk in found:
        if out and mk.start < out[-1].end:
            continue
        out.append(mk)
    return out


@dataclass
class _Block:
    text: str  # the block's lines joined by one space
    pieces: list[tuple[int, int, int]]  # each line: (block offset, answer offset, length)


def _reference_entries(answer: str, lines: list[_Line], markers: list[Marker]) -> set[int]:
    """The lines (by index) of a trailing reference list: the last lines of the answer that each open with their only
    marker followed by a title rather than a sentence ("[1] Refund policy (refunds.md)": no closing period)."""
    starts = [mk.start for mk in markers]
    out: set[int] = set()
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if line.kind in ("skip", "blank"):
            continue
        first = bisect_right(starts, line.start - 1)
        mine = [mk for mk in markers[first:] if mk.start < line.end]
        rest = answer[mine[0].end : line.end].strip() if mine else ""
        if len(mine) != 1 or mine[0].start != line.start or not rest or rest.rstrip("*_)\"'").endswith((".", "!", "?")):
            break
        out.add(i)
    return out


def _blocks(answer: str, lines: list[_Line], markers: list[Marker]) -> list[_Block]:
    """Lines grouped into blocks: a paragraph's lines, a list item with its indented continuation, a heading, a
    table row. A trailing reference list (_reference_entries) is skipped."""
    entries = _reference_entries(answer, lines, markers)
    blocks: list[list[_Line]] = []
    previous: _Line | None = None
    for n, line in enumerate(lines):
        if line.kind in ("skip", "blank") or n in entries:
            previous = None
            continue
        content = answer[line.start : line.end]
        joins = (
            previous is not None
            and line.kind == "text"
            and (
                (previous.kind == "item" and line.indent > previous.indent)
                or (content[:1].islower() and not answer[previous.start : previous.end].rstrip().endswith(":"))
            )
        )
        if joins:
            blocks[-1].append(line)
        else:
            blocks.append([line])
        previous = line if line.kind in ("text", "item") else None
    out = []
    for group in blocks:
        text, pieces = "", []
        for line in group:
            if text:
                text += " "
            pieces.append((len(text), line.start, line.end - line.start))
            text += answer[line.start : line.end]
        out.append(_Block(text, pieces))
    return out


def _claim(text: str, removed: list[tuple[int, int]]) -> str:
    out, at = [], 0
    for s, e in sorted(removed):
        out.append(text[at:s])
        at = max(at, e)
    out.append(text[at:])
    claim = _EMPTY_BRACKETS.sub("", _LEAD_ONLY.sub("", "".join(out)))
    claim = _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACE.sub(" ", claim)).strip()
    return claim


def _has_content(claim: str) -> bool:
    return any(m.group(0).lower() not in _LEAD_WORDS for m in _CONTENT.finditer(claim))


def read_markers(
    answer: str,
    refs: MarkerRefs,
    *,
    pattern: str | re.Pattern[str] | None = None,
    chunk_texts: Iterable[str] = (),
    normalize: Callable[[str], str] = lambda s: s,
) -> list[MarkerCitation]:
    """The answer's marker citations, in order (by sentence, then by the marker's place); one per (sentence,
    reference). chunk_texts: the call's retrieved texts, normalized by `normalize` (a marker copied with the chunk
    text around it is the chunk's own)."""
    if not answer:
        return []
    compiled = re.compile(pattern) if isinstance(pattern, str) and pattern else pattern or None
    lines, code, definitions = _lines(answer)
    protected = _Spans(
        [
            *code,
            *_inline_code(answer),
            *(m.span() for m in _LINK.finditer(answer)),
            *(m.span() for m in _URL.finditer(answer)),
            *((ln.start, ln.end) for ln in lines if ln.kind == "skip"),
        ]
    )
    markers = _find_markers(answer, protected, compiled, definitions, refs)
    if not markers:
        return []
    texts = [t for t in chunk_texts if t]
    # every sentence of the answer, in order: (block, [start, end) in the block, its markers)
    sentences: list[tuple[_Block, int, int, list[tuple[int, int, Marker]]]] = []
    by_start = {mk.start: mk for mk in markers}
    starts = sorted(by_start)
    for block in _blocks(answer, lines, markers):
        lo, hi = block.pieces[0][1], block.pieces[-1][1] + block.pieces[-1][2]
        mine = [by_start[s] for s in starts[bisect_right(starts, lo - 1) : bisect_right(starts, hi - 1)]]
        spans = []
        for mk in mine:
            s = _block_offset(block, mk.start)
            if s is not None:
                spans.append((s, s + (mk.end - mk.start), mk))
        start, k = 0, 0
        for end in sentence_ends(block.text, [(s, e) for s, e, _ in spans]):
            first = k
            while k < len(spans) and spans[k][0] < end:  # spans are in order: each is visited once
                k += 1
            sentences.append((block, start, end, spans[first:k]))
            start = end
    # a marker that opens its sentence (nothing but space, punctuation or markers before it) or a sentence of no
    # content of its own ("(see [3].)") gives its markers to the sentence before
    owners: list[list[tuple[_Block, int, int, Marker]]] = [[] for _ in sentences]  # (its block, sentence, at)
    claims: list[str] = []
    for n, (block, start, end, spans) in enumerate(sentences):
        text = block.text[start:end]
        claim = _claim(text, [(s - start, e - start) for s, e, _ in spans])
        claims.append(claim)
        content = _has_content(claim)
        leading = start > 0 or not content  # a line that opens with a marker and a sentence: the sentence's
        at = start  # the text before each marker, markers removed, is checked once: linear in the sentence
        for s, e, mk in spans:
            leading = leading and not _CONTENT.search(block.text, at, s)
            at = e
            target = n
            if (leading or not content) and n > 0:
                target = n - 1
            owners[target].append((block, start, s, mk))
    out: list[MarkerCitation] = []
    for n, owned in enumerate(owners):
        if not owned or not _has_content(claims[n]):
            continue
        seen: set[tuple[str, str]] = set()
        for block, start, s, mk in owned:
            if texts and _quoted(block.text, start, s, mk, texts, normalize):
                continue
            for kind, ref in mk.refs:
                if (kind, ref) in seen:
                    continue
                seen.add((kind, ref))
                out.append(MarkerCitation(kind, ref, mk.cited_as, claims[n], n, mk.start))
    return out


def _block_offset(block: _Block, at: int) -> int | None:
    """An answer offset as a block offset (None: not in the block's lines)."""
    for p, a, length in block.pieces:
        if a <= at < a + length:
            return p + (at - a)
    return None


def _quoted(text: str, sentence_start: int, at: int, mk: Marker, chunks: list[str], normalize) -> bool:
    """The marker and the words before it in its sentence stand in a chunk: the chunk's own bracket, copied."""
    lead = text[max(sentence_start, at - QUOTE_CONTEXT_CHARS) : at]
    lead_norm = normalize(lead)
    if len(lead_norm.strip()) < MIN_QUOTE_CHARS:
        return False
    window = normalize(lead + mk.cited_as)
    return any(window in chunk for chunk in chunks)
