"""Trace files made from the recorded OTLP fixtures (tests/fixtures/adapters/otlp/): several traces on one line, as
the collector's file exporter batches them, and generated files of any size (many turns, deep chains)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

OTLP = Path(__file__).parent / "fixtures" / "adapters" / "otlp"
START = 1794819600000000000  # 2026-11-16T09:00:00Z, the fixtures' clock


def otlp_lines(name: str) -> list[dict]:
    """The JSON lines of a committed OTLP fixture (the cut-off line that is not JSON left out)."""
    out = []
    for raw in (OTLP / name).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


def merged(*requests: dict) -> dict:
    """One export request holding the resources of several (spans and log records alike)."""
    out: dict[str, list] = {}
    for request in requests:
        for key in ("resourceSpans", "resourceLogs"):
            if key in request:
                out.setdefault(key, []).extend(copy.deepcopy(request[key]))
    return out


def spans_of(request: dict) -> list[dict]:
    return [sp for rs in request.get("resourceSpans", []) for ss in rs["scopeSpans"] for sp in ss["spans"]]


def attribute(span: dict, key: str):
    for kv in span.get("attributes", []):
        if kv["key"] == key:
            return next(iter(kv["value"].values()))
    return None


def chat_span(request: dict) -> dict:
    [chat] = [s for s in spans_of(request) if attribute(s, "gen_ai.operation.name") == "chat"]
    return chat


def request_id(request: dict) -> str:
    chat = chat_span(request)
    return f"{chat['traceId']}/{chat['spanId']}"


def question(request: dict) -> str:
    """The user's question of the fixture trace, as its retrieval span logged it (the call's prompt holds it)."""
    [text] = [
        attribute(s, "gen_ai.retrieval.query.text") for s in spans_of(request) if s["name"] == "retrieval help-kb"
    ]
    return text


def _base() -> tuple[dict, dict, dict, dict]:
    first = otlp_lines("otlp_attributes.jsonl")[0]
    spans = {s["name"]: s for s in spans_of(first)}
    return first["resourceSpans"][0], spans["retrieval help-kb"], spans["answer_question"], spans["chat gpt-4.1"]


def _documents_tagged(span: dict, tag: str) -> None:
    """The retrieval span's documents with ids of their own (each turn retrieves other chunks)."""
    for kv in span["attributes"]:
        if kv["key"] == "gen_ai.retrieval.documents":
            docs = json.loads(kv["value"]["stringValue"])
            for d in docs:
                d["id"] = f"{d['id']}@{tag}"
            kv["value"]["stringValue"] = json.dumps(docs)


def _lines_of(resource: dict, spans: list[dict], per_line: int) -> str:
    lines = []
    for i in range(0, len(spans), per_line):
        scope = {"scope": {"name": "generated"}, "spans": spans[i : i + per_line]}
        lines.append(json.dumps({"resourceSpans": [{"resource": resource["resource"], "scopeSpans": [scope]}]}))
    return "\n".join(lines) + "\n"


def many_turns(turns: int, *, traces: int = 1, per_line: int = 50) -> str:
    """OTLP lines of `traces` traces, each one root with `turns` question/answer turns under it: a retrieval (4
    chunks of its own) then a chat call, the fixture's first call's spans with new ids and times."""
    resource, retrieval, root, chat = _base()
    spans = []
    for t in range(traces):
        trace_id = f"{t + 1:032x}"
        top = copy.deepcopy(root)
        top.pop("parentSpanId", None)
        top.update(
            traceId=trace_id, spanId=f"{1:016x}", startTimeUnixNano=str(START), endTimeUnixNano=str(START + 10**12)
        )
        spans.append(top)
        for k in range(turns):
            at = START + k * 10**6
            r = copy.deepcopy(retrieval)
            r.update(traceId=trace_id, spanId=f"{2 * k + 2:016x}", parentSpanId=f"{1:016x}")
            r.update(startTimeUnixNano=str(at + 1000), endTimeUnixNano=str(at + 2000))
            _documents_tagged(r, f"{t}.{k}")
            c = copy.deepcopy(chat)
            c.update(traceId=trace_id, spanId=f"{2 * k + 3:016x}", parentSpanId=f"{1:016x}")
            c.update(startTimeUnixNano=str(at + 3000), endTimeUnixNano=str(at + 4000))
            spans += [r, c]
    return _lines_of(resource, spans, per_line)


def chain(depth: int, *, every: int = 100, per_line: int = 200) -> str:
    """One trace: a chain of `depth` spans, each the parent of the next, with a retrieval and a chat call under
    every `every`-th one."""
    resource, retrieval, root, chat = _base()
    trace_id = f"{1:032x}"
    spans = []
    for i in range(depth):
        s = copy.deepcopy(root)
        s.update(traceId=trace_id, spanId=f"{i + 1:016x}", startTimeUnixNano=str(START + i))
        s.update(endTimeUnixNano=str(START + 10**12 - i))
        if i:
            s["parentSpanId"] = f"{i:016x}"
        else:
            s.pop("parentSpanId", None)
        spans.append(s)
    n = depth
    for i in range(0, depth, every):
        at = START + 10**9 + i * 10**4
        r = copy.deepcopy(retrieval)
        n += 1
        r.update(traceId=trace_id, spanId=f"{n:016x}", parentSpanId=f"{i + 1:016x}")
        r.update(startTimeUnixNano=str(at), endTimeUnixNano=str(at + 1))
        c = copy.deepcopy(chat)
        n += 1
        c.update(traceId=trace_id, spanId=f"{n:016x}", parentSpanId=f"{i + 1:016x}")
        c.update(startTimeUnixNano=str(at + 2), endTimeUnixNano=str(at + 3))
        spans += [r, c]
    return _lines_of(resource, spans, per_line)


def openinference_chain(depth: int, *, every: int = 20) -> list[bytes]:
    """Phoenix span lines of one trace: a chain of `depth` CHAIN spans, each the parent of the next, with a retriever
    and an LLM call (the fixture's first trace's spans, new ids and times) under every `every`-th one; only the root
    names the surface."""
    from datetime import datetime, timedelta, timezone

    fixture = Path(__file__).parent / "fixtures" / "adapters" / "openinference" / "phoenix_spans.jsonl"
    spans = []
    for raw in fixture.read_text(encoding="utf-8").splitlines():
        try:
            spans.append(json.loads(raw))
        except ValueError:
            continue  # the planted bad line
    first = {s["span_kind"]: s for s in reversed(spans) if s["context"]["trace_id"].endswith("0001")}
    chain_span, retriever, llm = first["CHAIN"], first["RETRIEVER"], first["LLM"]
    t0 = datetime(2026, 11, 2, 9, tzinfo=timezone.utc)

    def at(us: int) -> str:
        return (t0 + timedelta(microseconds=us)).isoformat().replace("+00:00", "Z")

    def span(template: dict, span_id: str, parent: str | None, start: int, end: int) -> bytes:
        s = copy.deepcopy(template)
        s["context"] = {"trace_id": "7f3a00000000000000000000000000ff", "span_id": span_id}
        s["parent_id"], s["start_time"], s["end_time"] = parent, at(start), at(end)
        if parent is not None:  # only the root names the surface: a call finds it at the top of the chain
            s["attributes"] = {k: v for k, v in s["attributes"].items() if not k.startswith("metadata.")}
        return json.dumps(s).encode()

    lines = [span(chain_span, f"c{i}", f"c{i - 1}" if i else None, i, 10**9 - i) for i in range(depth)]
    for i in range(0, depth, every):
        lines.append(span(retriever, f"r{i}", f"c{i}", 10**7 + 10 * i, 10**7 + 10 * i + 1))
        lines.append(span(llm, f"l{i}", f"c{i}", 10**7 + 10 * i + 2, 10**7 + 10 * i + 3))
    return lines
