"""Span-tree helpers the trace adapters share: which retriever spans feed which model call.

The pairing rule (README "Trace formats"): a model call's retrieved chunks come from the retriever spans of
the same trace that ended before the call started, nearest ancestor first, then nearest in time.

- "Nearest ancestor": for each eligible retriever, the lowest common ancestor of it and the call, counted in
  steps up from the call (1 = the call's parent, so a sibling of the call or a retriever nested under a
  sibling span is at 1; a retriever under the grandparent is at 2). A retriever with no common ancestor in
  the file (a parent span missing from the export) comes after every retriever that has one.
- "Nearest in time": among retrievers at the same distance, the one that ended last comes first.
- Every eligible retriever is used (an agent that retrieves twice before answering saw both), in that order;
  ranks follow it (first retriever's documents first, each in its own document order).

Limits, which the adapters document: spans of other files or traces are never joined; a retriever still
running when the call started, or with no end time, is not paired; one trace holding several
question/answer turns under one parent pairs a later call with the earlier turns' retrievers too.

Pure and format-free: an adapter maps its spans to `Span`, calls `pair`, and reads its own documents.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

LLM = "llm"
RETRIEVER = "retriever"
OTHER = "other"


@dataclass(frozen=True)
class Span:
    """One span of a trace, in the units its format gives (times: integer nanoseconds since the epoch)."""

    trace_id: str
    span_id: str
    parent_id: str | None  # None for a root span
    start: int
    end: int | None  # None: unknown or still running (such a retriever is never paired)
    kind: str  # LLM | RETRIEVER | OTHER


class SpanTree:
    """The spans of one file, indexed by (trace_id, span_id)."""

    def __init__(self, spans: Iterable[Span]):
        self.spans: dict[tuple[str, str], Span] = {}
        self.retrievers: dict[str, list[Span]] = {}
        for s in spans:
            self.spans.setdefault((s.trace_id, s.span_id), s)
        for s in self.spans.values():
            if s.kind == RETRIEVER:
                self.retrievers.setdefault(s.trace_id, []).append(s)

    def ancestors(self, span: Span) -> list[str]:
        """The span ids from `span`'s parent up to the highest ancestor present in the file (cycle-safe)."""
        out: list[str] = []
        seen = {span.span_id}
        parent = span.parent_id
        while parent and parent not in seen:
            out.append(parent)
            seen.add(parent)
            node = self.spans.get((span.trace_id, parent))
            if node is None:
                break
            parent = node.parent_id
        return out

    def pair(self, call: Span) -> list[Span]:
        """The retriever spans that feed `call`, in rank order (see the module docstring)."""
        up = self.ancestors(call)
        distance = {sid: i + 1 for i, sid in enumerate(up)}
        eligible: list[tuple[float, int, str, Span]] = []
        for r in self.retrievers.get(call.trace_id, []):
            if r.end is None or r.end > call.start or r.span_id == call.span_id:
                continue
            d: float = float("inf")
            for sid in [r.span_id, *self.ancestors(r)]:
                if sid in distance:
                    d = distance[sid]
                    break
            eligible.append((d, -r.end, r.span_id, r))
        eligible.sort(key=lambda e: (e[0], e[1], e[2]))
        return [e[3] for e in eligible]


def pair(spans: Iterable[Span], call: Span) -> list[Span]:
    """One-off form of `SpanTree(spans).pair(call)`; build a SpanTree once when pairing many calls."""
    return SpanTree(spans).pair(call)
