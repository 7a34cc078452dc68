"""Span-tree helpers the trace adapters share: which retriever spans feed which model call, and the bounds on
what one call, and one file, may carry.

The pairing rule (docs/adapters.md): a model call's retrieved chunks come from the retriever spans of
the same trace that ended before the call started, nearest ancestor first, then nearest in time.

- "Nearest ancestor": for each eligible retriever, the lowest common ancestor of it and the call, counted in
  steps up from the call (1 = the call's parent, so a sibling of the call or a retriever nested under a
  sibling span is at 1; a retriever under the grandparent is at 2). A retriever with no common ancestor in
  the file (a parent span missing from the export) comes after every retriever that has one.
- "Nearest in time": among retrievers at the same distance, the one that ended last comes first.
- Eligible retrievers are used in that order, at most MAX_PAIRED_RETRIEVERS of them (an agent that retrieves
  twice before answering saw both); ranks follow it (first retriever's documents first, each in its own order).

Bounds (never silent: `Paired.left_out` counts the eligible retrievers past the first MAX_PAIRED_RETRIEVERS,
and `bounded_chunks` writes what a bound left out into the record's `retrieved_left_out`):
- a common ancestor more than MAX_ANCESTOR_STEPS steps above the call, or above the retriever, counts as none
  (the retriever then ranks among those with no common ancestor, by time);
- a call keeps its first MAX_CHUNKS_PER_CALL chunks (rank order);
- `RecordBudget`: one call's record at most MAX_RECORD_BYTES, one file's records at most RECORD_BYTES_PER_SOURCE_BYTE
  times its bytes (at least RECORD_BYTES_FLOOR); a call past either is a `record_too_large` reject.
So pairing costs O((spans + calls) * MAX_ANCESTOR_STEPS) steps, and a file's records grow linearly with it.

Limits, which the adapters document: spans of other files or traces are never joined; a retriever still
running when the call started, or with no end time, is not paired; one trace holding several
question/answer turns under one parent pairs a later call with the earlier turns' retrievers too.

Pure and format-free: an adapter maps its spans to `Span`, calls `pair`, and reads its own documents.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from citegate_assets.lib.core.lines import RAW_KEEP_BYTES

LLM = "llm"
RETRIEVER = "retriever"
OTHER = "other"

MAX_PAIRED_RETRIEVERS = 16  # retriever spans one call reads, nearest first
MAX_ANCESTOR_STEPS = 64  # how far up a common ancestor is looked for (real traces are a few levels deep)
MAX_CHUNKS_PER_CALL = 256  # retrieved chunks one call keeps, rank order
MAX_RECORD_BYTES = 32 * 1024 * 1024  # one call's record, as the default [ingest].max_line_bytes bounds a log line
RECORD_BYTES_PER_SOURCE_BYTE = 16  # one file's records, against its own bytes: a call reads up to 16 retrievers
RECORD_BYTES_FLOOR = 64 * 1024 * 1024
CHUNK_ENTRY_BYTES = 256  # what one retrieved entry costs beyond its text (a dict per chunk)

Key = tuple[str, str]  # (trace_id, span_id)


@dataclass(frozen=True)
class Span:
    """One span of a trace, in the units its format gives (times: integer nanoseconds since the epoch)."""

    trace_id: str
    span_id: str
    parent_id: str | None  # None for a root span
    start: int
    end: int | None  # None: unknown or still running (such a retriever is never paired)
    kind: str  # LLM | RETRIEVER | OTHER


@dataclass(frozen=True)
class Paired:
    """The retrievers that feed a call, in rank order, and how many more were eligible past the bound."""

    spans: list[Span]
    left_out: int


class SpanTree:
    """The spans of one file, indexed by (trace_id, span_id).

    Built once per file: each span's parent (a parent id the file lacks is a node of its own, so spans under
    the same missing parent still share it; a parent cycle is cut at its smallest span id), and each retriever
    with an end time listed, in end order, at itself and at each of its first `max_steps` ancestors. A call
    then walks up at most `max_steps` ancestors and takes, level by level, the latest-ended eligible retrievers
    listed there: work per call and per retriever is bounded, never per (call, retriever) pair.
    `visits` counts the steps and list entries looked at (tests bound it)."""

    def __init__(
        self,
        spans: Iterable[Span],
        *,
        max_paired: int = MAX_PAIRED_RETRIEVERS,
        max_steps: int = MAX_ANCESTOR_STEPS,
    ):
        self.spans: dict[Key, Span] = {}
        for s in spans:
            self.spans.setdefault((s.trace_id, s.span_id), s)
        self.max_paired = max_paired
        self.max_steps = max_steps
        self.visits = 0
        self._parent: dict[Key, Key | None] = {}
        for key, s in self.spans.items():
            self._parent[key] = (s.trace_id, s.parent_id) if s.parent_id else None
        for parent in list(self._parent.values()):
            if parent is not None and parent not in self._parent:
                self._parent[parent] = None  # a parent the file lacks
        self._cut_cycles()
        retrievers = sorted(
            (s for s in self.spans.values() if s.kind == RETRIEVER and s.end is not None),
            key=lambda s: (s.end, s.span_id),
        )
        self.retrievers: dict[str, list[Span]] = {}  # per trace, in end order
        self._listed: dict[Key, list[Span]] = {}  # a node -> retrievers at it or below (max_steps), end order
        for r in retrievers:
            self.retrievers.setdefault(r.trace_id, []).append(r)
            node: Key | None = (r.trace_id, r.span_id)
            for _ in range(self.max_steps + 1):
                if node is None:
                    break
                self.visits += 1
                self._listed.setdefault(node, []).append(r)
                node = self._parent.get(node)

    def _cut_cycles(self) -> None:
        """Every parent chain ends: a chain that comes back to itself loses the link above its smallest span id."""
        done: set[Key] = set()
        for start in list(self._parent):
            path: list[Key] = []
            on_path: dict[Key, int] = {}
            node: Key | None = start
            while node is not None and node not in done:
                if node in on_path:
                    cycle = path[on_path[node] :]
                    self._parent[min(cycle)] = None
                    break
                on_path[node] = len(path)
                path.append(node)
                self.visits += 1
                node = self._parent.get(node)
            done.update(path)

    def parent(self, trace_id: str, span_id: str) -> str | None:
        """The span's parent id as the tree holds it (a cut cycle has none)."""
        up = self._parent.get((trace_id, span_id))
        return up[1] if up is not None else None

    def ancestors(self, span: Span) -> list[str]:
        """The span ids from `span`'s parent up to the highest ancestor (a parent the file lacks included)."""
        out: list[str] = []
        node = self._parent.get((span.trace_id, span.span_id), None)
        if (span.trace_id, span.span_id) not in self._parent and span.parent_id:
            node = (span.trace_id, span.parent_id)
        while node is not None:
            out.append(node[1])
            node = self._parent.get(node)
        return out

    def paired(self, call: Span) -> Paired:
        """The retriever spans that feed `call`, in rank order, at most max_paired (see the module docstring)."""
        key = (call.trace_id, call.span_id)
        taken: list[Span] = []
        seen: set[str] = set()
        node = self._parent[key] if key in self._parent else (call.trace_id, call.parent_id) if call.parent_id else None
        for _ in range(self.max_steps):
            if node is None or len(taken) >= self.max_paired:
                break
            self.visits += 1
            listed = self._listed.get(node)
            if listed:
                self._take(listed, call, taken, seen)
            node = self._parent.get(node)
        in_trace = self.retrievers.get(call.trace_id, [])
        if len(taken) < self.max_paired:  # no common ancestor within reach: by time alone
            self._take(in_trace, call, taken, seen)
        eligible = bisect_right(in_trace, call.start, key=lambda s: s.end or 0)
        if call.kind == RETRIEVER and call.end is not None and call.end <= call.start:
            eligible -= 1  # the call itself, were it a retriever
        return Paired(taken, max(0, eligible - len(taken)))

    def _take(self, listed: list[Span], call: Span, taken: list[Span], seen: set[str]) -> None:
        """The eligible retrievers of `listed` (end order) not taken yet, latest end first (ties: by span id)."""
        i = bisect_right(listed, call.start, key=lambda s: s.end or 0)
        while i > 0 and len(taken) < self.max_paired:
            end = listed[i - 1].end
            j = i
            while j > 0 and listed[j - 1].end == end:
                j -= 1
            for r in sorted(listed[j:i], key=lambda s: s.span_id):
                self.visits += 1
                if r.span_id in seen or r.span_id == call.span_id:
                    continue
                if len(taken) >= self.max_paired:
                    break
                seen.add(r.span_id)
                taken.append(r)
            i = j

    def pair(self, call: Span) -> list[Span]:
        """The retriever spans that feed `call`, in rank order (at most max_paired)."""
        return self.paired(call).spans


def pair(spans: Iterable[Span], call: Span) -> list[Span]:
    """One-off form of `SpanTree(spans).pair(call)`; build a SpanTree once when pairing many calls."""
    return SpanTree(spans).pair(call)


# --- what one call and one file may carry ----------------------------------------------------------------------


def bounded_chunks(
    chunks: list[tuple[str, Any]], retrievers_left_out: int, left_out: list[dict]
) -> list[tuple[str, Any]]:
    """A call's chunks (id, payload) in rank order, at most MAX_CHUNKS_PER_CALL; what the bounds left out (chunks
    past it, retrievers past MAX_PAIRED_RETRIEVERS) is counted in one entry of `left_out` (the record's
    retrieved_left_out) whose chunk_id is empty."""
    beyond = max(0, len(chunks) - MAX_CHUNKS_PER_CALL)
    if beyond or retrievers_left_out:
        left_out.append({"chunk_id": "", "why": bound_note(beyond, retrievers_left_out)})
    return chunks[:MAX_CHUNKS_PER_CALL]


def bound_note(chunks: int, retrievers: int) -> str:
    parts = []
    if chunks:
        parts.append(f"{chunks} more chunks past the first {MAX_CHUNKS_PER_CALL} a call keeps")
    if retrievers:
        parts.append(
            f"{retrievers} more eligible retriever spans past the {MAX_PAIRED_RETRIEVERS} nearest a call reads"
        )
    return "left out by a bound: " + "; ".join(parts)


def record_size(record: dict) -> int:
    """What a record costs, about: its texts' characters, and CHUNK_ENTRY_BYTES per retrieved chunk."""
    size = 0
    for key in ("prompt", "answer"):
        value = record.get(key)
        if isinstance(value, str):
            size += len(value)
    citations = record.get("citations")
    if isinstance(citations, str):
        size += len(citations)
    elif isinstance(citations, list):
        size += CHUNK_ENTRY_BYTES * len(citations) + sum(
            len(c.get("span") or "") + len(c.get("claim") or "") for c in citations if isinstance(c, dict)
        )
    for entry in record.get("retrieved") or []:
        if isinstance(entry, dict):
            size += CHUNK_ENTRY_BYTES + len(entry.get("text") or "") + len(entry.get("chunk_id") or "")
    return size


class RecordBudget:
    """The bytes a file's records may hold: MAX_RECORD_BYTES per call, and RECORD_BYTES_PER_SOURCE_BYTE times the
    file's own bytes (at least RECORD_BYTES_FLOOR) for all of them; `charge` says why a record is over."""

    def __init__(self, source_bytes: int):
        self.limit = max(RECORD_BYTES_PER_SOURCE_BYTE * source_bytes, RECORD_BYTES_FLOOR)
        self.used = 0

    def charge(self, record: dict) -> str | None:
        size = record_size(record)
        if size > MAX_RECORD_BYTES:
            return f"its record would hold about {size:,} bytes, over the {MAX_RECORD_BYTES:,} one call may carry"
        if self.used + size > self.limit:
            return (
                f"the file's records already hold about {self.used:,} bytes; with this one they would pass "
                f"{self.limit:,} ({RECORD_BYTES_PER_SOURCE_BYTE}x the file's bytes): split the file"
            )
        self.used += size
        return None


def part_text(part: dict) -> str:
    """A call's (or a piece's) own part of its source line, as one JSON object for its reject row: bounded to
    what a reject row keeps of a line, never raising (an unserializable value is written as its repr)."""
    try:
        text = json.dumps(part, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError) as exc:
        text = json.dumps({"unserializable": f"{type(exc).__name__}: {exc}"[:200]})
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= RAW_KEEP_BYTES:
        return text
    return encoded[:RAW_KEEP_BYTES].decode("utf-8", "ignore")


# --- the product surface ------------------------------------------------------------------------------------


def surface_key_of(attributes: dict[str, Any], key: str) -> str | None:
    """The attribute naming the surface: `key` itself, else one namespaced as `<namespace>.key` (`app.surface`,
    the way OpenTelemetry attributes are usually named), the first by name when several are; None when none is."""
    if key in attributes:
        return key
    suffix = "." + key
    found = sorted(name for name in attributes if isinstance(name, str) and name.endswith(suffix))
    return found[0] if found else None


# --- which of a document's ids is its chunk id ------------------------------------------------------------------


def id_text(value: Any) -> str | None:
    """A document id as text: a non-empty string (stripped) or an integer; None for anything else."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


@dataclass(frozen=True)
class ChunkIdentity:
    """A retrieved document's two ids: the one its store gave it (a LangChain `Document.id`, an OTel document `id`:
    often a vector store's UUID) and the application's own in its metadata (`metadata[chunk_id_key]`).

    The chunk id is the metadata one when there is one, for that is what the application renders in its prompt
    and cites; the store's id when the prompt shows it and not the metadata one, or when there is no metadata id.
    The other id, when it differs, is kept as the retrieved entry's `doc_id`."""

    store_id: str | None
    metadata_id: str | None

    @staticmethod
    def of(store_value: Any, metadata_value: Any) -> ChunkIdentity | None:
        store_id, metadata_id = id_text(store_value), id_text(metadata_value)
        if store_id is None and metadata_id is None:
            return None
        return ChunkIdentity(store_id, metadata_id)

    def resolve(self, prompt: str) -> tuple[str, str | None]:
        """(chunk id, the other id or None) for a call whose prompt text is `prompt`."""
        if self.metadata_id is None or self.metadata_id == self.store_id:
            return self.store_id or self.metadata_id or "", None
        if self.store_id is None:
            return self.metadata_id, None
        if self.store_id in prompt and self.metadata_id not in prompt:
            return self.store_id, self.metadata_id
        return self.metadata_id, self.store_id
