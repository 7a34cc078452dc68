"""Pairing and what a call may carry are bounded (lib/ingest/adapters/traces.py): on generated OTLP files a file 4x as
big
gives about 4x the records (not the square), at a peak memory bounded by the file's size; a 40,000-span chain is
paired in steps linear in its spans (counted, not timed); and a call or a file past a bound is said so, in the
record's `retrieved_left_out` or as a `record_too_large` reject, never silently."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from citegate_assets.lib.core.lines import Line
from citegate_assets.lib.ingest.adapters import (
    AdapterSettings,
    Call,
    adapter,
    convert_lines,
    detect_lines,
    otlp,
    record_line,
    traces,
)
from citegate_assets.lib.ingest.adapters.traces import LLM, OTHER, RETRIEVER, Span, SpanTree

from .trace_files import chain, many_turns, merged, openinference_chain, otlp_lines, spans_of


def _lines(text: str) -> list[Line]:
    return [Line(i, raw.encode(), 0, len(raw.encode())) for i, raw in enumerate(text.splitlines(), 1)]


def _converted(text: str) -> tuple[list[Call], int, int]:
    """The calls of an OTLP file, their records' bytes, and the conversion's peak traced memory."""
    lines = _lines(text)
    tracemalloc.start()
    try:
        conv = convert_lines(adapter("otlp"), lines, AdapterSettings())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert conv.error is None
    calls = [item for item in conv.items if isinstance(item, Call)]
    size = 0
    for call in calls:
        if call.record is not None:
            raw, _ = record_line(call)
            assert raw is not None
            size += len(raw)
    return calls, size, peak


def test_records_grow_linearly_with_the_file_and_memory_stays_bounded():
    """Every turn of a conversation pairs with every earlier turn's retrieval (one trace): the nearest 16 are read,
    and the records of 4x the turns are about 4x the bytes."""
    small, large = many_turns(100), many_turns(400)
    calls_small, bytes_small, _ = _converted(small)
    calls_large, bytes_large, peak = _converted(large)
    assert len(calls_small) == 100 and len(calls_large) == 400
    assert all(c.record is not None for c in calls_large)
    assert bytes_large <= 4.5 * bytes_small, (bytes_small, bytes_large)
    assert peak <= 10 * len(large), (peak, len(large))
    last = max(calls_large, key=lambda c: c.record["logged_at"] if c.record else "")
    assert last.record is not None
    assert len(last.record["retrieved"]) == traces.MAX_PAIRED_RETRIEVERS * 4  # the nearest retrievers' chunks
    [note] = last.record["retrieved_left_out"]  # the rest is counted, not dropped silently
    assert note["chunk_id"] == "" and note["why"] == (
        "left out by a bound: 384 more eligible retriever spans past the 16 nearest a call reads"
    )
    assert {r["chunk_id"].rsplit("@", 1)[1] for r in last.record["retrieved"]} == {f"0.{k}" for k in range(384, 400)}


def test_a_deep_chain_pairs_in_steps_linear_in_its_spans(monkeypatch):
    """A chain of 10,000 and of 40,000 spans with a retriever and a call under every 20th span: the steps the span
    tree takes (ancestor steps, retrievers looked at) grow as the spans do, each call and each retriever walking at
    most MAX_ANCESTOR_STEPS up, never the whole chain per (call, retriever) pair."""
    trees: list[SpanTree] = []

    class Counted(SpanTree):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            trees.append(self)

    monkeypatch.setattr(otlp, "SpanTree", Counted)
    visits = []
    for depth in (10_000, 40_000):
        calls, _, _ = _converted(chain(depth, every=20))
        paired_spans = 2 * (depth // 20)  # a retriever and a call per 20 spans
        assert len(calls) == depth // 20 and all(c.record is not None for c in calls)
        tree = trees.pop()
        assert tree.visits <= depth + paired_spans * 4 * traces.MAX_ANCESTOR_STEPS, tree.visits
        visits.append(tree.visits)
        # the deepest call reads the 16 nearest of the retrievers above it and counts the others
        deepest = calls[-1].record
        assert deepest is not None and deepest["retrieved_left_out"] == [
            {
                "chunk_id": "",
                "why": f"left out by a bound: {depth // 20 - 16} more eligible retriever spans past the 16 nearest "
                "a call reads",
            }
        ]
    assert visits[1] <= 4.5 * visits[0], visits


def test_the_span_tree_bounds_the_steps_per_call_whatever_the_depth():
    """Calls at every level of a chain (a comb): steps per call are bounded by MAX_ANCESTOR_STEPS, not the depth."""

    def comb(depth: int) -> tuple[list[Span], list[Span]]:
        spans, calls = [], []
        for i in range(depth):
            spans.append(Span("t", f"n{i}", f"n{i - 1}" if i else None, i, 10**9 - i, OTHER))
            spans.append(Span("t", f"r{i}", f"n{i}", 10**6 + 2 * i, 10**6 + 2 * i + 1, RETRIEVER))
            calls.append(Span("t", f"c{i}", f"n{i}", 10**7 + i, 10**7 + i + 1, LLM))
        return spans + calls, calls

    visits = []
    for depth in (2_000, 8_000):
        spans, calls = comb(depth)
        tree = SpanTree(spans)
        paired = [tree.paired(c) for c in calls]
        visits.append(tree.visits)
        deepest = paired[-1]
        assert [s.span_id for s in deepest.spans[:3]] == [f"r{depth - 1}", f"r{depth - 2}", f"r{depth - 3}"]
        assert len(deepest.spans) == traces.MAX_PAIRED_RETRIEVERS and deepest.left_out == depth - 16
    assert visits[1] <= 4.5 * visits[0], visits


def test_a_call_keeps_its_first_chunks_and_counts_the_rest():
    line = otlp_lines("otlp_attributes.jsonl")[0]
    retrieval = next(s for s in spans_of(line) if s["name"] == "retrieval help-kb")
    docs = [{"id": f"kb-{i}", "score": 0.5, "content": f"text {i}"} for i in range(300)]
    for kv in retrieval["attributes"]:
        if kv["key"] == "gen_ai.retrieval.documents":
            kv["value"]["stringValue"] = json.dumps(docs)
    [call] = [c for c in otlp.ADAPTER.convert(iter([(1, json.dumps(line).encode())]), AdapterSettings())]
    assert isinstance(call, Call) and call.record is not None
    assert [r["chunk_id"] for r in call.record["retrieved"]] == [f"kb-{i}" for i in range(traces.MAX_CHUNKS_PER_CALL)]
    assert call.record["retrieved_left_out"] == [
        {"chunk_id": "", "why": "left out by a bound: 44 more chunks past the first 256 a call keeps"}
    ]


@pytest.mark.parametrize("fmt", ["otlp", "openinference", "langfuse"])
def test_a_file_whose_records_pass_its_bound_rejects_the_calls_past_it(fmt, monkeypatch):
    """One file's records may hold RECORD_BYTES_PER_SOURCE_BYTE times its bytes (at least RECORD_BYTES_FLOOR): the
    calls past it are record_too_large rejects, named, in source order; a call over MAX_RECORD_BYTES is too."""
    fixtures = Path(__file__).parent / "fixtures" / "adapters"
    name = {
        "otlp": "otlp/otlp_attributes.jsonl",
        "openinference": "openinference/phoenix_spans.jsonl",
        "langfuse": "langfuse/observations_export.jsonl",
    }[fmt]
    raw = (fixtures / name).read_bytes().splitlines()
    _, lines = detect_lines([Line(i, r, 0, len(r)) for i, r in enumerate(raw, 1)])
    whole = convert_lines(adapter(fmt), lines, AdapterSettings())
    landed = [c for c in whole.items if isinstance(c, Call) and c.record is not None]
    assert len(landed) >= 3
    sizes = [traces.record_size(c.record) for c in landed if c.record is not None]
    budget = sum(sizes[:2])  # room for the first two calls' records only
    monkeypatch.setattr(traces, "RECORD_BYTES_FLOOR", budget)
    monkeypatch.setattr(traces, "RECORD_BYTES_PER_SOURCE_BYTE", 0)
    bounded = convert_lines(adapter(fmt), lines, AdapterSettings())
    by_id = {c.request_id: c for c in bounded.items if isinstance(c, Call)}
    kept = [c.request_id for c in landed if by_id[c.request_id].record is not None]
    assert kept == [c.request_id for c in landed][:2]
    for c in landed[2:]:
        over = by_id[c.request_id]
        assert over.reason == "record_too_large" and over.detail is not None and "split the file" in over.detail
        assert over.part is not None or fmt == "openinference"  # its own span (an OpenInference line is one span)
    # one call's bound: every record over it is rejected, whatever room the file has
    monkeypatch.setattr(traces, "RECORD_BYTES_FLOOR", 10**12)
    monkeypatch.setattr(traces, "MAX_RECORD_BYTES", min(sizes) - 1)
    per_call = convert_lines(adapter(fmt), lines, AdapterSettings())
    too_large = {
        c.request_id: c.detail for c in per_call.items if isinstance(c, Call) and c.reason == "record_too_large"
    }
    assert set(too_large) == {c.request_id for c in landed}
    assert all(d is not None and "one call may carry" in d for d in too_large.values())


def test_merged_export_requests_pair_per_trace():
    """Several traces on one line (as the collector batches them) pair exactly as on lines of their own."""
    lines = otlp_lines("otlp_attributes.jsonl")
    apart = "\n".join(json.dumps(x) for x in lines) + "\n"
    together = json.dumps(merged(*lines)) + "\n"
    records = {}
    for text in (apart, together):
        calls, _, _ = _converted(text)
        records[text] = {c.request_id: c.record for c in calls}
    assert records[apart] == records[together]


def test_openinference_finds_surfaces_and_wrapped_calls_in_steps_linear_in_a_deep_chain(monkeypatch):
    """What a call needs of its ancestors (the nearest surface, whether an LLM span wraps another) is found once per
    span: parent look-ups grow as the chain does, not as chain x calls."""
    from citegate_assets.lib.ingest.adapters import openinference

    steps = [0]
    parent = openinference._Trace.parent

    def counted(self, span):
        steps[0] += 1
        return parent(self, span)

    monkeypatch.setattr(openinference._Trace, "parent", counted)
    counts = []
    for depth in (10_000, 40_000):
        steps[0] = 0
        raw = openinference_chain(depth)
        conv = convert_lines(
            adapter("openinference"), [Line(i, r, 0, len(r)) for i, r in enumerate(raw, 1)], AdapterSettings()
        )
        calls = [c for c in conv.items if isinstance(c, Call)]
        assert conv.error is None and len(calls) == depth // 20 and all(c.record is not None for c in calls)
        assert {c.record["surface"] for c in calls if c.record} == {"help-center"}  # the root's
        assert steps[0] <= 3 * depth, steps[0]
        counts.append(steps[0])
    assert counts[1] <= 4.5 * counts[0], counts
