"""OTLP JSON lines, as the OpenTelemetry collector's file exporter writes them (`format: json`), with spans that
follow the GenAI semantic conventions: each inference span becomes one citegate-log/1 record.

Input: one `ExportTraceServiceRequest` (`resourceSpans` → `scopeSpans` → `spans`) per line; a line may also be
an `ExportLogsServiceRequest` (`resourceLogs` → `scopeLogs` → `logRecords`) when the same exporter serves a logs
pipeline, which is where the older per-message events go (the Python SDK emits events as log records). OTLP/JSON
rules: hex `traceId`/`spanId`, lowerCamelCase keys, integer enums, int64 as decimal strings, attributes as
`[{key, value: {stringValue|intValue|doubleValue|boolValue|arrayValue|kvlistValue|bytesValue}}]`.

- Inference span: `gen_ai.operation.name` in chat / text_completion / generate_content. Its messages come from
  `gen_ai.system_instructions` + `gen_ai.input.messages` / `gen_ai.output.messages` (current conventions, a
  JSON string or structured), else from the log-record events on the span (`gen_ai.system.message`,
  `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`; conventions up to
  v1.36), or from the same attributes on a `gen_ai.client.inference.operation.details` event (current
  conventions with content in events only). Provider: `gen_ai.provider.name`, else the older `gen_ai.system` (not
  needed for the record).
- Retrieval span: `gen_ai.operation.name = "retrieval"` with `gen_ai.retrieval.documents`, a JSON list of
  `{id, score, ...}` (the convention requires only id and score). Text, when a producer adds it, is read from
  `content` (the conventions' name for text in message parts), else `text`; metadata from `metadata`.
- Pairing: lib/adapters/traces.py (same trace, ended before the call started, nearest ancestor first, then
  nearest in time, within its bounds); ranks follow that order. Chunk id = `metadata[chunk_id_key]` when the
  document has it, else its `id` (traces.ChunkIdentity: the other id is kept as `doc_id`). A retriever's
  documents are read once, whatever the number of calls it feeds.
  A call with no retrieval span paired is rejected (`retrieval_not_paired`), never given an empty retrieval
  (each of its citations would be a false fabricated_id); a paired retrieval span that failed (status ERROR)
  counts as paired and adds no document.
- request_id = `<traceId>/<spanId>` (a span id is only unique within its trace); logged_at = the span's start
  (RFC 3339 UTC, microseconds); answer_model = `gen_ai.response.model`, else `gen_ai.request.model`; surface =
  the span attribute `surface_key`, else that of its nearest ancestor span that has it (at most
  MAX_ANCESTOR_STEPS up), else that resource attribute, else resource `service.name` unless it is the
  SDK default (`unknown_service`, `unknown_service:<process>`), else `default_surface`.
- prompt: the captured messages are not the bytes sent, so an OpenAI-chat-shaped body is rebuilt
  (`{"model", "messages": [{role, content}]}`, system instructions first, text parts → content) with
  `prompt_encoding: json` and `prompt_reconstructed: true`.
- A document without text takes its text from the prompt when its id marks exactly one section there (see
  `_text_from_prompt`); the retrieved item then says `"text_source": "prompt"`. Otherwise it is left out of
  `retrieved` and listed in the record's `retrieved_left_out` ({chunk_id, why}).
- Citations: the answer text parsed as JSON, at the dotted `citations_path`; an answer that is not JSON (or has
  no such path) goes in `citations` as its raw text, so ingest puts it in answer_rejects.
- Content capture off (no message content at all) → content_not_captured; a value the collector's redaction
  processor masked (`redaction.masked.keys` / `redaction.redacted.keys` naming a content attribute, or an
  OpenInference-style `__REDACTED__` text) → content_redacted; a content attribute cut by the SDK's attribute
  length limit (`OTEL_[SPAN_]ATTRIBUTE_VALUE_LENGTH_LIMIT`: a JSON string that ends mid-value) →
  content_truncated. The same holds for the documents of a paired retrieval span.
- Hostile input: a line is read piece by piece (a span or log record that is not OTLP/JSON is a reject of its
  own, keeping its own JSON; an attribute value that cannot be read fails only a call that needs it), and each
  call is converted on its own (whatever its conversion raises is its reject). A line holds many traces, so a
  rejected call's reject row keeps its own span and events (`_part`), never the line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .base import (
    CONTENT_NOT_CAPTURED,
    CONTENT_REDACTED,
    CONTENT_TRUNCATED,
    EMPTY_LINE,
    INVALID_JSON,
    INVALID_UTF8,
    NOT_OF_FORMAT,
    RECORD_TOO_LARGE,
    RETRIEVAL_NOT_PAIRED,
    AdapterSettings,
    Call,
    EventsOfOtherFile,
    LineReject,
    Partners,
    WaitForPartner,
)
from .traces import (
    LLM,
    MAX_ANCESTOR_STEPS,
    OTHER,
    RETRIEVER,
    ChunkIdentity,
    RecordBudget,
    Span,
    SpanTree,
    bounded_chunks,
    part_text,
    surface_key_of,
)

INFERENCE_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
RETRIEVAL_OPERATION = "retrieval"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
CONTENT_KEYS = frozenset({INPUT_MESSAGES, OUTPUT_MESSAGES, SYSTEM_INSTRUCTIONS, RETRIEVAL_DOCUMENTS})
# the collector's redaction processor (summary: debug) lists the keys it masked / removed, comma-separated
REDACTION_SUMMARY_KEYS = ("redaction.masked.keys", "redaction.redacted.keys")
REDACTED_PLACEHOLDER = "__REDACTED__"  # OpenInference's placeholder, seen when such spans reach a collector
# the older per-message events (log records named so), in input order; gen_ai.choice is the output
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
# current conventions, content in events only (capture mode event_only): one event with the content attributes
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
STATUS_ERROR = 2
_HEX_TRACE = re.compile(r"[0-9a-fA-F]{32}")
_HEX_SPAN = re.compile(r"[0-9a-fA-F]{16}")
_INT = re.compile(r"-?\d+")


class _Bad(ValueError):
    """A piece of a line (a span, a log record, a list) that is not OTLP/JSON; the message names the field."""


class _Unusable(Exception):
    """A call that cannot be converted: (reason, detail)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class _Broken:
    """An attribute (or a resource) whose value could not be read: a call that needs it is rejected, by where."""

    where: str
    why: str

    def __repr__(self) -> str:
        return f"<unreadable: {self.why}>"


@dataclass
class _SpanRow:
    line_no: int
    order: int  # position in the file, for source order within a line
    span: Span
    attributes: dict[str, Any]
    resource: dict[str, Any] | _Broken
    status_code: int
    name: str


@dataclass
class _Event:
    name: str
    body: Any
    time: int
    order: int
    line_no: int
    file: str | None = None  # another file of the landing folder (a logs file of its own); None: the call's file

    def same(self) -> tuple:
        """What tells one event from another: the same record read from two copies of a file is one event."""
        return (self.name, self.time, json.dumps(self.body, sort_keys=True, default=repr))


@dataclass
class OtlpPartner:
    """What one otlp file offers the others of the landing folder: the GenAI events its log records carry, by
    (traceId, spanId), and its own inference spans (so a logs file can say whose events its lines hold)."""

    events: dict[tuple[str, str], list[_Event]]
    broken_events: dict[tuple[str, str], str]
    calls: frozenset[tuple[str, str]]
    holds_logs: bool


@dataclass
class _BrokenSpan:
    """A span that could not be read: a reject of its own; a call of its trace cannot be paired for sure."""

    line_no: int
    order: int
    where: str
    why: str
    trace_id: str | None
    span_id: str | None
    is_call: bool  # its gen_ai.operation.name says it is a model call
    part: str


@dataclass
class _File:
    spans: list[_SpanRow] = field(default_factory=list)
    events: dict[tuple[str, str], list[_Event]] = field(default_factory=dict)
    broken_events: dict[tuple[str, str], str] = field(default_factory=dict)  # (trace, span) -> why
    broken_spans: list[_BrokenSpan] = field(default_factory=list)
    line_rejects: list[LineReject] = field(default_factory=list)
    source_bytes: int = 0
    holds_logs: bool = False  # a line of log records (an ExportLogsServiceRequest)


class OtlpAdapter:
    name = "otlp"

    def detect(self, first_line: bytes) -> bool:
        try:
            obj = json.loads(first_line)
        except (ValueError, RecursionError):
            return False
        return isinstance(obj, dict) and (
            isinstance(obj.get("resourceSpans"), list) or isinstance(obj.get("resourceLogs"), list)
        )

    def convert(self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings) -> Iterator[Call | LineReject]:
        """Reads the whole file first (pairing needs every span of a trace), then yields in source order."""
        for item in self.convert_joined(lines, settings, Partners()):
            if not isinstance(item, EventsOfOtherFile):
                yield item

    def partner(self, lines: Iterable[tuple[int, bytes]]) -> OtlpPartner:
        """The file's GenAI events and inference span ids, for the other files of the landing folder."""
        f = _read_file(lines)
        return OtlpPartner(
            f.events,
            f.broken_events,
            frozenset((r.span.trace_id, r.span.span_id) for r in f.spans if r.span.kind == LLM),
            f.holds_logs,
        )

    def convert_joined(
        self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings, partners: Partners
    ) -> Iterator[Call | LineReject | EventsOfOtherFile]:
        """As convert, each call also taking the events of its span that other files of the landing folder hold
        (the file-exporter layout: spans and log records in files of their own); raises WaitForPartner while a
        call with no message content yet may still get its events from a file still being written."""
        f = _read_file(lines)
        calls = {(r.span.trace_id, r.span.span_id) for r in f.spans if r.span.kind == LLM}
        others = [(p.name, p.written_at, p.content) for p in partners.files if isinstance(p.content, OtlpPartner)]
        for name, _, other in others:
            _join_events(f, calls, name, other)
        still_written = [(name, at) for name, at, other in others if other.holds_logs and at is not None]
        if still_written:
            for row in f.spans:
                if row.span.kind != LLM or _has_content(row, f.events.get((row.span.trace_id, row.span.span_id), [])):
                    continue
                ended = row.span.end or row.span.start
                for name, at in still_written:
                    if at < ended + partners.settle_ns:
                        raise WaitForPartner(
                            f"call {row.span.trace_id}/{row.span.span_id} has no message content yet, and {name}, "
                            "a file of log records still being written, may still bring its events"
                        )
        out: list[tuple[int, int, Call | LineReject | EventsOfOtherFile]] = []
        for key, events in f.events.items():
            if key in calls:
                continue
            owner = next((name for name, _, other in others if key in other.calls), None)
            if owner is not None:
                out.extend((e.line_no, e.order, EventsOfOtherFile(e.line_no, owner)) for e in events if e.file is None)
        yield from self._convert(f, settings, out)

    def _convert(
        self, f: _File, settings: AdapterSettings, out: list[tuple[int, int, Call | LineReject | EventsOfOtherFile]]
    ) -> Iterator[Call | LineReject | EventsOfOtherFile]:
        tree = SpanTree(row.span for row in f.spans)
        conv = _Conversion(f, tree, settings)
        out.extend((r.line_no, -1, r) for r in f.line_rejects)
        for b in f.broken_spans:
            if b.is_call and b.trace_id and b.span_id:
                rid = f"{b.trace_id}/{b.span_id}"
                out.append((b.line_no, b.order, Call(b.line_no, rid, None, NOT_OF_FORMAT, b.why, part=b.part)))
            else:
                out.append((b.line_no, b.order, LineReject(b.line_no, NOT_OF_FORMAT, b.why, part=b.part)))
        for row in f.spans:
            if row.span.kind == LLM:
                out.append((row.line_no, row.order, conv.call(row)))
        out.sort(key=lambda t: (t[0], t[1]))
        for _, _, item in out:
            yield item


def _read_file(lines: Iterable[tuple[int, bytes]]) -> _File:
    f = _File()
    order = 0
    for line_no, raw in lines:
        f.source_bytes += len(raw)
        order = _read_line(f, line_no, raw, order)
    return f


def _join_events(f: _File, calls: set[tuple[str, str]], name: str, other: OtlpPartner) -> None:
    """The events (and unreadable events) another file holds for this file's calls, each once."""
    for key in calls & other.events.keys():
        mine = f.events.setdefault(key, [])
        seen = {e.same() for e in mine}
        for e in other.events[key]:
            if e.same() not in seen:
                seen.add(e.same())
                mine.append(_Event(e.name, e.body, e.time, e.order, e.line_no, name))
    for key in calls & other.broken_events.keys():
        f.broken_events.setdefault(key, f"{name}: {other.broken_events[key]}")


def _has_content(row: _SpanRow, events: list[_Event]) -> bool:
    """The call's content is all there: on its span, or in events up to the last one a call gives (its choice, or
    the one event that holds everything)."""
    if any(k in row.attributes for k in (INPUT_MESSAGES, SYSTEM_INSTRUCTIONS)):
        return True
    return any(e.name in (CHOICE_EVENT, DETAILS_EVENT) for e in events)


# --- reading lines ---------------------------------------------------------------------------------------------
# A line is read piece by piece: a span or log record that is not OTLP/JSON is a reject of its own (with its own
# JSON as the reject row's part), and every other span of the line is still read; only a line that is no JSON
# object of the format at all is a whole-line reject.


def _read_line(f: _File, line_no: int, raw: bytes, order: int) -> int:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        f.line_rejects.append(LineReject(line_no, INVALID_UTF8, f"not UTF-8 at byte {exc.start}"))
        return order
    if not text.strip():
        f.line_rejects.append(LineReject(line_no, EMPTY_LINE, "blank line"))
        return order
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        f.line_rejects.append(LineReject(line_no, INVALID_JSON, str(exc)[:200]))
        return order
    if not isinstance(obj, dict):
        what = f"line holds a JSON {type(obj).__name__}, not an ExportTraceServiceRequest object"
        f.line_rejects.append(LineReject(line_no, NOT_OF_FORMAT, what))
        return order
    if "resourceSpans" not in obj and "resourceLogs" not in obj:
        what = "no 'resourceSpans' (ExportTraceServiceRequest) or 'resourceLogs' (ExportLogsServiceRequest)"
        f.line_rejects.append(LineReject(line_no, NOT_OF_FORMAT, what))
        return order
    for top, scopes_key, items_key in (
        ("resourceSpans", "scopeSpans", "spans"),
        ("resourceLogs", "scopeLogs", "logRecords"),
    ):
        if top == "resourceLogs" and top in obj:
            f.holds_logs = True
        for where, value, resource in _items(f, line_no, obj, top, scopes_key, items_key):
            order += 1
            if top == "resourceSpans":
                _read_span(f, value, where, line_no, order, resource)
            else:
                _read_log_record(f, value, where, line_no, order)
    return order


def _items(
    f: _File, line_no: int, obj: dict, top: str, scopes_key: str, items_key: str
) -> Iterator[tuple[str, Any, Any]]:
    """(where, span or log record, its resource's attributes) of a line; a list or object that is not what
    OTLP/JSON puts there is a piece reject, and the pieces beside it are still read."""

    def bad(where: str, value: Any, what: str) -> None:
        why = f"line {line_no}: {where} is {_kind(value)}, not {what}"
        f.line_rejects.append(LineReject(line_no, NOT_OF_FORMAT, why, part=part_text({"line": line_no, where: value})))

    resources = obj.get(top)
    if resources is None:
        return
    if not isinstance(resources, list):
        bad(top, resources, "a list")
        return
    for ri, rs in enumerate(resources):
        where = f"{top}[{ri}]"
        if not isinstance(rs, dict):
            bad(where, rs, "an object")
            continue
        resource = _resource(rs, where)
        scopes = rs.get(scopes_key)
        if scopes is None:
            continue
        if not isinstance(scopes, list):
            bad(f"{where}.{scopes_key}", scopes, "a list")
            continue
        for si, ss in enumerate(scopes):
            scope_where = f"{where}.{scopes_key}[{si}]"
            if not isinstance(ss, dict):
                bad(scope_where, ss, "an object")
                continue
            items = ss.get(items_key)
            if items is None:
                continue
            if not isinstance(items, list):
                bad(f"{scope_where}.{items_key}", items, "a list")
                continue
            for pi, item in enumerate(items):
                yield f"{scope_where}.{items_key}[{pi}]", item, resource


def _kind(value: Any) -> str:
    return "null" if value is None else f"a JSON {type(value).__name__}"


def _resource(rs: dict, where: str) -> dict[str, Any] | _Broken:
    """A resource's attributes; unreadable ones are _Broken values, an unreadable resource one _Broken."""
    try:
        return _attributes(_obj(rs, "resource", where), f"{where}.resource")
    except (_Bad, RecursionError) as exc:
        return _Broken(f"{where}.resource", str(exc)[:200])


def _read_span(f: _File, sp: Any, where: str, line_no: int, order: int, resource: Any) -> None:
    try:
        f.spans.append(_span(sp, where, line_no, order, resource))
    except Exception as exc:  # noqa: BLE001 — whatever is wrong with one span, it is that span's reject
        why = str(exc) if isinstance(exc, _Bad) else f"{where}: {type(exc).__name__}: {exc}"
        trace_id, span_id, is_call = _identity(sp)
        f.broken_spans.append(
            _BrokenSpan(
                line_no,
                order,
                where,
                f"line {line_no}: {why}"[:500],
                trace_id,
                span_id,
                is_call,
                part_text({"line": line_no, "span": sp}),
            )
        )


def _identity(sp: Any) -> tuple[str | None, str | None, bool]:
    """What can still be read of a broken span: its ids (when hex), and whether it says it is a model call."""
    if not isinstance(sp, dict):
        return None, None, False
    ids = []
    for key, pattern in (("traceId", _HEX_TRACE), ("spanId", _HEX_SPAN)):
        value = sp.get(key)
        ok = isinstance(value, str) and pattern.fullmatch(value) and set(value) != {"0"}
        ids.append(value.lower() if ok and isinstance(value, str) else None)
    is_call = False
    attributes = sp.get("attributes")
    if isinstance(attributes, list):
        for kv in attributes:
            if isinstance(kv, dict) and kv.get("key") == "gen_ai.operation.name":
                value = kv.get("value")
                is_call = isinstance(value, dict) and value.get("stringValue") in INFERENCE_OPERATIONS
    return ids[0], ids[1], is_call


def _read_log_record(f: _File, lr: Any, where: str, line_no: int, order: int) -> None:
    try:
        keyed = _log_event(lr, where, order, line_no)
    except Exception as exc:  # noqa: BLE001 — one log record's fault is its own
        why = str(exc) if isinstance(exc, _Bad) else f"{where}: {type(exc).__name__}: {exc}"
        why = f"line {line_no}: {why}"[:500]
        trace_id, span_id, _ = _identity(lr)
        if trace_id and span_id:  # an event of that call, unreadable: the call cannot be rebuilt whole
            f.broken_events.setdefault((trace_id, span_id), why)
        f.line_rejects.append(
            LineReject(line_no, NOT_OF_FORMAT, why, part=part_text({"line": line_no, "logRecord": lr}))
        )
        return
    if keyed is not None:
        key, event = keyed
        f.events.setdefault(key, []).append(event)


def _obj(parent: dict, key: str, where: str) -> dict:
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Bad(f"{_join(where, key)} is not an object")
    return value


def _list(parent: Any, key: str, where: str) -> list:
    if not isinstance(parent, dict):
        raise _Bad(f"{where} is not an object")
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Bad(f"{_join(where, key)} is not a list")
    return value


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _hex_id(obj: dict, key: str, where: str, pattern: re.Pattern[str], required: bool) -> str | None:
    value = obj.get(key)
    if value in (None, "") and not required:
        return None
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise _Bad(
            f"{where}.{key} is {_quote(value)}, not {pattern.pattern[-3:-1]} hex digits "
            "(OTLP/JSON writes ids as hex; protobuf's own JSON mapping would give base64)"
        )
    if set(value) == {"0"}:
        if required:
            raise _Bad(f"{where}.{key} is all zeros (an invalid id)")
        return None
    return value.lower()


def _quote(value: Any) -> str:
    """A value as a detail quotes it: short, never raising."""
    try:
        return json.dumps(value)[:60]
    except (TypeError, ValueError, RecursionError):
        return type(value).__name__


def _nanos(obj: dict, key: str, where: str, required: bool) -> int | None:
    value = obj.get(key)
    if value is None or value == "0" or value == 0:
        if required:
            raise _Bad(f"{where}.{key} is missing")
        return None
    if isinstance(value, bool) or not ((isinstance(value, int)) or (isinstance(value, str) and _INT.fullmatch(value))):
        raise _Bad(f"{where}.{key} is {_quote(value)}, not an int64 (a decimal string in OTLP/JSON)")
    return int(value)


def _span(sp: Any, where: str, line_no: int, order: int, resource: dict[str, Any] | _Broken) -> _SpanRow:
    if not isinstance(sp, dict):
        raise _Bad(f"{where} is not an object")
    trace_id = _hex_id(sp, "traceId", where, _HEX_TRACE, True)
    span_id = _hex_id(sp, "spanId", where, _HEX_SPAN, True)
    parent_id = _hex_id(sp, "parentSpanId", where, _HEX_SPAN, False)
    start = _nanos(sp, "startTimeUnixNano", where, True)
    end = _nanos(sp, "endTimeUnixNano", where, False)
    attributes = _attributes(sp, where)
    status = _obj(sp, "status", where)
    code = status.get("code", 0)
    if isinstance(code, bool) or not isinstance(code, int):
        raise _Bad(f"{where}.status.code is {_quote(code)}, not an integer enum")
    assert trace_id is not None and span_id is not None and start is not None
    op = attributes.get("gen_ai.operation.name")
    if isinstance(op, _Broken):  # which kind of span this is cannot be told
        raise _Bad(f"{op.where}: {op.why}")
    kind = LLM if op in INFERENCE_OPERATIONS else RETRIEVER if op == RETRIEVAL_OPERATION else OTHER
    name = sp.get("name")
    return _SpanRow(
        line_no=line_no,
        order=order,
        span=Span(trace_id, span_id, parent_id, start, end, kind),
        attributes=attributes,
        resource=resource,
        status_code=code,
        name=name if isinstance(name, str) else "",
    )


def _log_event(lr: Any, where: str, order: int, line_no: int) -> tuple[tuple[str, str], _Event] | None:
    """A log record that is a GenAI event on a span, keyed by (traceId, spanId); None for any other record."""
    if not isinstance(lr, dict):
        raise _Bad(f"{where} is not an object")
    attributes = _attributes(lr, where)
    name = lr.get("eventName") or attributes.get("event.name")  # eventName: OTLP 1.5+; event.name before
    if name is not None and not isinstance(name, str):
        raise _Bad(f"{where}: its event name is {_quote(name)}, not a string")
    if not isinstance(name, str) or not (name in MESSAGE_EVENTS or name in (CHOICE_EVENT, DETAILS_EVENT)):
        return None
    trace_id = _hex_id(lr, "traceId", where, _HEX_TRACE, False)
    span_id = _hex_id(lr, "spanId", where, _HEX_SPAN, False)
    if trace_id is None or span_id is None:
        return None  # an event outside any span belongs to no call
    body = _any_value(lr["body"], f"{where}.body") if lr.get("body") is not None else None
    if name == DETAILS_EVENT:
        body = attributes  # its content is in its attributes, structured
    time = _nanos(lr, "timeUnixNano", where, False) or _nanos(lr, "observedTimeUnixNano", where, False) or 0
    return (trace_id, span_id), _Event(name, body, time, order, line_no)


def _attributes(obj: dict, where: str) -> dict[str, Any]:
    """key -> value; a value that cannot be read is a _Broken (only a call that needs it fails); a list entry
    with no readable key fails the span (which attribute it was cannot be told)."""
    out: dict[str, Any] = {}
    for i, kv in enumerate(_list(obj, "attributes", where)):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise _Bad(f"{where}.attributes[{i}] is not a {{key, value}} object")
        if kv["key"] in out:
            continue
        at = f"{where}.attributes[{i}].value"
        try:
            out[kv["key"]] = _any_value(kv.get("value") or {}, at)
        except _Bad as exc:
            out[kv["key"]] = _Broken(at, str(exc))
        except RecursionError:
            out[kv["key"]] = _Broken(at, f"{at} nests too deeply")
    return out


def _any_value(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise _Bad(f"{where} is not an AnyValue object")
    if not value:
        return None
    if len(value) != 1:
        raise _Bad(f"{where} has several value fields: {', '.join(sorted(map(str, value)))[:80]}")
    key, v = next(iter(value.items()))
    if key in ("stringValue", "bytesValue"):  # bytes stay base64 text: they are never message content
        if not isinstance(v, str):
            raise _Bad(f"{where}.{key} is not a string")
        return v
    if key == "boolValue":
        if not isinstance(v, bool):
            raise _Bad(f"{where}.boolValue is not a boolean")
        return v
    if key == "intValue":
        if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, str) and _INT.fullmatch(v))):
            raise _Bad(f"{where}.intValue is not an int64")
        return int(v)
    if key == "doubleValue":
        if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
            return float(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _Bad(f"{where}.doubleValue is not a number")
        return float(v)
    if key == "arrayValue":
        items = _list(v, "values", f"{where}.arrayValue")
        return [_any_value(x, f"{where}.arrayValue.values[{i}]") for i, x in enumerate(items)]
    if key == "kvlistValue":
        out: dict[str, Any] = {}
        for i, kv in enumerate(_list(v, "values", f"{where}.kvlistValue")):
            if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
                raise _Bad(f"{where}.kvlistValue.values[{i}] is not a {{key, value}} object")
            out.setdefault(kv["key"], _any_value(kv.get("value") or {}, f"{where}.kvlistValue.values[{i}].value"))
        return out
    raise _Bad(f"{where} has an unknown value field {key!r}")


def _get(attributes: dict[str, Any], key: str, where: str) -> Any:
    """An attribute the call needs; one that could not be read rejects the call, naming it."""
    value = attributes.get(key)
    if isinstance(value, _Broken):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {key} cannot be read ({value.why})")
    return value


# --- one call -------------------------------------------------------------------------------------------------


class _Conversion:
    """The file's calls, converted one at a time against its span tree; what one call's conversion raises is
    that call's reject, never the file's. Paired retrievers' documents are read once, whatever the calls."""

    def __init__(self, f: _File, tree: SpanTree, settings: AdapterSettings):
        self.f = f
        self.tree = tree
        self.settings = settings
        self.rows: dict[tuple[str, str], _SpanRow] = {}
        for r in f.spans:
            self.rows.setdefault((r.span.trace_id, r.span.span_id), r)
        self.retrievers = {key: r for key, r in self.rows.items() if r.span.kind == RETRIEVER}
        self.documents: dict[tuple[str, str], list[tuple[ChunkIdentity, str | None]] | _Unusable] = {}
        self.budget = RecordBudget(f.source_bytes)
        self.unpairable: dict[str, str] = {}  # trace -> why: a span of it (not a model call) could not be read
        for b in f.broken_spans:
            if b.trace_id and not b.is_call:
                self.unpairable.setdefault(b.trace_id, f"span {b.span_id or '?'} of its trace ({b.why})")

    def call(self, row: _SpanRow) -> Call:
        request_id = f"{row.span.trace_id}/{row.span.span_id}"
        key = (row.span.trace_id, row.span.span_id)
        events = sorted(self.f.events.get(key, []), key=lambda e: (e.time, e.order))
        paired: list[_SpanRow] = []
        try:
            record, paired = self._record(row, events, request_id)
            over = self.budget.charge(record)
            if over is not None:
                raise _Unusable(RECORD_TOO_LARGE, f"span {row.span.span_id}: {over}")
        except _Unusable as exc:
            reason, detail = exc.reason, exc.detail
        except Exception as exc:  # noqa: BLE001 — a shape this adapter did not expect: this call's reject only
            reason, detail = NOT_OF_FORMAT, f"span {row.span.span_id}: cannot be read: {type(exc).__name__}: {exc}"
        else:
            return Call(
                row.line_no,
                request_id,
                record,
                lines=_other_lines(row, events, paired),
                files=_other_files(events),
            )
        return Call(
            row.line_no,
            request_id,
            None,
            reason,
            f"line {row.line_no}: {detail}"[:500],
            part=_part(row, events, paired),
            lines=_other_lines(row, events, paired),
            files=_other_files(events),
        )

    def _record(self, row: _SpanRow, events: list[_Event], request_id: str) -> tuple[dict, list[_SpanRow]]:
        attrs = row.attributes
        where = f"span {row.span.span_id}"
        broken_event = self.f.broken_events.get((row.span.trace_id, row.span.span_id))
        if broken_event is not None:
            raise _Unusable(NOT_OF_FORMAT, f"{where}: one of its events cannot be read ({broken_event})")
        _check_redaction(attrs, where)
        model = _get(attrs, "gen_ai.response.model", where) or _get(attrs, "gen_ai.request.model", where)
        if not isinstance(model, str) or not model:
            raise _Unusable(NOT_OF_FORMAT, f"{where}: neither gen_ai.response.model nor gen_ai.request.model is set")
        request_model = _get(attrs, "gen_ai.request.model", where)
        details = [e for e in events if e.name == DETAILS_EVENT and isinstance(e.body, dict)]
        if any(k in attrs for k in (INPUT_MESSAGES, SYSTEM_INSTRUCTIONS)):
            messages, answer = _from_attributes(attrs, where)
        elif details:
            event_where = f"{where} ({DETAILS_EVENT} event)"
            _check_redaction(details[0].body, event_where)
            messages, answer = _from_attributes(details[0].body, event_where)
        else:
            messages, answer = _from_events(events, where)
        if not any(_message_texts(m) for m in messages):
            has_events = any(e.name in MESSAGE_EVENTS for e in events)
            raise _Unusable(
                CONTENT_NOT_CAPTURED,
                f"{where}: no message content (no {INPUT_MESSAGES} / {SYSTEM_INSTRUCTIONS} attribute or "
                f"{DETAILS_EVENT}"
                + (
                    ", and its gen_ai.*.message events carry no content"
                    if has_events
                    else ", no gen_ai.*.message event"
                )
                + "): message content capture was off",
            )
        for m in messages:
            if any(t.strip() == REDACTED_PLACEHOLDER for t in _message_texts(m)):
                raise _Unusable(CONTENT_REDACTED, f"{where}: a {m['role']} message is {REDACTED_PLACEHOLDER}")
        if answer is not None and answer.strip() == REDACTED_PLACEHOLDER:
            raise _Unusable(CONTENT_REDACTED, f"{where}: the answer is {REDACTED_PLACEHOLDER}")
        model_sent = request_model if isinstance(request_model, str) and request_model else model
        body = {"model": model_sent, "messages": messages}
        texts = [t for m in messages for t in _message_texts(m)]
        paired = self.tree.paired(row.span)
        rows = [self.retrievers[(s.trace_id, s.span_id)] for s in paired.spans]
        retrieved, left_out = self._retrieved(row, rows, paired.left_out, texts)
        record: dict[str, Any] = {
            "request_id": request_id,
            "logged_at": _rfc3339(row.span.start),
            "surface": _surface(row, self._ancestors(row), self.settings),
            "answer_model": model,
            "prompt": json.dumps(body, ensure_ascii=False),
            "prompt_encoding": "json",
            "prompt_reconstructed": True,
            "retrieved": retrieved,
            "answer": answer,
            "citations": _citations(answer, self.settings.citations_path),
        }
        if left_out:
            record["retrieved_left_out"] = left_out
        return record, rows

    def _ancestors(self, row: _SpanRow) -> Iterator[_SpanRow]:
        """The span's ancestors in the file, nearest first, at most MAX_ANCESTOR_STEPS of them."""
        node = row.span
        for _ in range(MAX_ANCESTOR_STEPS):
            parent = self.tree.parent(node.trace_id, node.span_id)
            up = self.rows.get((node.trace_id, parent)) if parent is not None else None
            if up is None:
                return
            yield up
            node = up.span

    def _retrieved(
        self, row: _SpanRow, paired: list[_SpanRow], beyond: int, texts: list[str]
    ) -> tuple[list[dict], list[dict]]:
        why = self.unpairable.get(row.span.trace_id)
        if why is not None:
            raise _Unusable(NOT_OF_FORMAT, f"span {row.span.span_id}: cannot be paired: {why}")
        if not paired:
            raise _Unusable(
                RETRIEVAL_NOT_PAIRED,
                f"span {row.span.span_id}: no retrieval span of trace {row.span.trace_id} ended before the call "
                "started",
            )
        docs: list[tuple[ChunkIdentity, str | None]] = []
        for r in paired:
            if r.status_code == STATUS_ERROR:
                continue  # a failed retrieval returned nothing
            docs.extend(self._documents(r))
        prompt = "\n".join(texts)
        seen: set[str] = set()
        firsts = []
        store_ids: dict[str, str] = {}
        for identity, text in docs:
            chunk_id, store_id = identity.resolve(prompt)
            if chunk_id not in seen:  # the same chunk from two retrievers: its first (best) rank
                seen.add(chunk_id)
                firsts.append((chunk_id, text))
                if store_id is not None:
                    store_ids[chunk_id] = store_id
        left_out: list[dict] = []
        unique = bounded_chunks(firsts, beyond, left_out)
        all_ids = [c for c, _ in unique]
        missing = [c for c, text in unique if text is None]
        from_prompt = _texts_from_prompt(texts, missing, all_ids) if missing else {}
        retrieved: list[dict] = []
        for chunk_id, text in unique:
            entry: dict[str, Any]
            if text is not None:
                entry = {"chunk_id": chunk_id, "rank": len(retrieved) + 1, "text": text}
            else:
                found, why = from_prompt[chunk_id]
                if found is None:
                    left_out.append({"chunk_id": chunk_id, "why": why})
                    continue
                entry = {"chunk_id": chunk_id, "rank": len(retrieved) + 1, "text": found, "text_source": "prompt"}
            if chunk_id in store_ids:
                entry["doc_id"] = store_ids[chunk_id]
            retrieved.append(entry)
        return retrieved, left_out

    def _documents(self, r: _SpanRow) -> list[tuple[ChunkIdentity, str | None]]:
        key = (r.span.trace_id, r.span.span_id)
        if key not in self.documents:
            try:
                self.documents[key] = _documents(r, self.settings)
            except _Unusable as exc:
                self.documents[key] = exc
            except Exception as exc:  # noqa: BLE001 — a retriever this adapter cannot read rejects its calls
                where = f"retrieval span {r.span.span_id} (line {r.line_no})"
                self.documents[key] = _Unusable(NOT_OF_FORMAT, f"{where}: {type(exc).__name__}: {exc}"[:300])
        found = self.documents[key]
        if isinstance(found, _Unusable):
            raise _Unusable(found.reason, found.detail)
        return found


def _other_lines(row: _SpanRow, events: list[_Event], paired: list[_SpanRow]) -> tuple[int, ...]:
    """The source lines besides the call's own that its record was read from: its events and paired retrievers."""
    return tuple(sorted({e.line_no for e in events if e.file is None} | {r.line_no for r in paired} - {row.line_no}))


def _other_files(events: list[_Event]) -> tuple[tuple[str, int], ...]:
    """The lines of other files (a logs file of their own) the call's events were read from."""
    return tuple(sorted({(e.file, e.line_no) for e in events if e.file is not None}))


def _part(row: _SpanRow, events: list[_Event], paired: list[_SpanRow]) -> str:
    """The call's own spans and records, as a rejected call's reject row keeps them (its line's other calls never)."""
    s = row.span
    return part_text(
        {
            "line": row.line_no,
            "span": {
                "traceId": s.trace_id,
                "spanId": s.span_id,
                "parentSpanId": s.parent_id,
                "name": row.name,
                "startTimeUnixNano": str(s.start),
                "endTimeUnixNano": None if s.end is None else str(s.end),
                "status": {"code": row.status_code},
                "attributes": row.attributes,
            },
            "events": [
                {
                    **({"file": e.file} if e.file is not None else {}),
                    "line": e.line_no,
                    "name": e.name,
                    "timeUnixNano": str(e.time),
                    "body": e.body,
                }
                for e in events
            ],
            "retrievers": [{"spanId": r.span.span_id, "line": r.line_no} for r in paired],
        }
    )


def _check_redaction(attributes: dict[str, Any], where: str, keys: frozenset[str] = CONTENT_KEYS) -> None:
    for summary in REDACTION_SUMMARY_KEYS:
        value = _get(attributes, summary, where)  # unreadable: whether content was masked cannot be told
        if isinstance(value, str):
            hit = sorted({k.strip() for k in value.split(",")} & keys)
            if hit:
                raise _Unusable(
                    CONTENT_REDACTED,
                    f"{where}: the collector's redaction processor changed {', '.join(hit)} ({summary})",
                )


def _parse_content(value: Any, key: str, where: str) -> Any:
    """A content attribute: structured (an arrayValue) or a JSON string; a JSON string cut short is truncated."""
    if isinstance(value, _Broken):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {key} cannot be read ({value.why})")
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:
        # the first error is the end of the text (an unterminated string is one too): all before it was valid JSON
        if isinstance(exc, json.JSONDecodeError) and (
            exc.msg.startswith("Unterminated string") or exc.pos >= len(value.rstrip())
        ):
            raise _Unusable(
                CONTENT_TRUNCATED,
                f"{where}: {key} ends mid-JSON after {len(value)} characters (cut by an attribute length limit)",
            ) from None
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {key} is not JSON: {str(exc)[:120]}") from None


def _from_attributes(attrs: dict[str, Any], where: str) -> tuple[list[dict], str | None]:
    messages: list[dict] = []
    system = _parse_content(attrs.get(SYSTEM_INSTRUCTIONS), SYSTEM_INSTRUCTIONS, where)
    if system is not None:
        if not isinstance(system, list):
            raise _Unusable(NOT_OF_FORMAT, f"{where}: {SYSTEM_INSTRUCTIONS} is not a list of parts")
        messages.append({"role": "system", "content": _parts_content(system, f"{where}: {SYSTEM_INSTRUCTIONS}")})
    inputs = _parse_content(attrs.get(INPUT_MESSAGES), INPUT_MESSAGES, where)
    for i, m in enumerate(_message_list(inputs, INPUT_MESSAGES, where)):
        messages.append({"role": m["role"], "content": _parts_content(m["parts"], f"{where}: {INPUT_MESSAGES}[{i}]")})
    outputs = _parse_content(attrs.get(OUTPUT_MESSAGES), OUTPUT_MESSAGES, where)
    answer = None
    for i, m in enumerate(_message_list(outputs, OUTPUT_MESSAGES, where)):
        content = _parts_content(m["parts"], f"{where}: {OUTPUT_MESSAGES}[{i}]")
        answer = content if isinstance(content, str) else "".join(p["text"] for p in content)
        break  # the first choice is the answer
    return messages, answer


def _message_list(value: Any, key: str, where: str) -> list[dict]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {key} is not a list of messages")
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("parts"), list):
            raise _Unusable(NOT_OF_FORMAT, f"{where}: {key}[{i}] is not a {{role, parts}} message")
    return value


def _parts_content(parts: list, where: str) -> str | list[dict]:
    """GenAI parts → OpenAI chat content: one text part → a string, several → text parts; text is `text`
    parts' `content` and a `tool_call_response`'s `response`; tool calls, blobs, uris, files are left out."""
    texts: list[str] = []
    for i, p in enumerate(parts):
        if not isinstance(p, dict):
            raise _Unusable(NOT_OF_FORMAT, f"{where}.parts[{i}] is not an object")
        if p.get("type") == "text" and isinstance(p.get("content"), str):
            texts.append(p["content"])
        elif p.get("type") == "tool_call_response" and p.get("response") is not None:
            r = p["response"]
            texts.append(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False))
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": t} for t in texts]


def _from_events(events: list[_Event], where: str) -> tuple[list[dict], str | None]:
    messages: list[dict] = []
    answer = None
    for ev in events:
        body = ev.body if isinstance(ev.body, dict) else {}
        if ev.name in MESSAGE_EVENTS:
            content = body.get("content")
            if content is None:
                continue  # capture off: the event carries the role only
            if not isinstance(content, (str, list)):
                raise _Unusable(NOT_OF_FORMAT, f"{where}: {ev.name} event content is not text or a part list")
            messages.append({"role": MESSAGE_EVENTS[ev.name], "content": content})
        elif ev.name == CHOICE_EVENT and answer is None and body.get("index", 0) == 0:
            message = body.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                answer = content
    return messages, answer


def _message_texts(m: dict) -> list[str]:
    c = m.get("content")
    if isinstance(c, str):
        return [c] if c else []
    if isinstance(c, list):
        return [p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str) and p["text"]]
    return []


def _surface(row: _SpanRow, ancestors: Iterable[_SpanRow], settings: AdapterSettings) -> str:
    """The span's own `surface_key` attribute (or `<namespace>.surface_key`), else the nearest ancestor span's that
    has one (an app sets it on the request's root span), else the resource's, else a service.name of the app's,
    else default_surface."""
    where = f"span {row.span.span_id}"
    for span in (row, *ancestors):
        key = surface_key_of(span.attributes, settings.surface_key)
        value = _get(span.attributes, key, f"span {span.span.span_id}") if key else None
        if isinstance(value, str) and value.strip():
            return value
    if isinstance(row.resource, _Broken):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: its resource cannot be read ({row.resource.why}): no surface")
    key = surface_key_of(row.resource, settings.surface_key)
    value = _get(row.resource, key, where) if key else None
    if isinstance(value, str) and value.strip():
        return value
    service = _get(row.resource, "service.name", where) if isinstance(row.resource, dict) else None
    if isinstance(service, str) and service.strip() and not service.startswith("unknown_service"):
        return service
    return settings.default_surface


def _rfc3339(nanos: int) -> str:
    seconds, rest = divmod(nanos, 1_000_000_000)
    t = datetime.fromtimestamp(seconds, tz=timezone.utc).replace(microsecond=rest // 1000)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _citations(answer: str | None, path: str) -> Any:
    if answer is None:
        return ""
    try:
        value: Any = json.loads(answer)
    except (ValueError, RecursionError):
        return answer
    for step in path.split(".") if path else []:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return answer
    return value


# --- retrieved chunks -----------------------------------------------------------------------------------------


def _documents(r: _SpanRow, settings: AdapterSettings) -> list[tuple[ChunkIdentity, str | None]]:
    where = f"retrieval span {r.span.span_id}"
    _check_redaction(r.attributes, where, frozenset({RETRIEVAL_DOCUMENTS}))
    if RETRIEVAL_DOCUMENTS not in r.attributes:
        raise _Unusable(
            CONTENT_NOT_CAPTURED, f"{where} has no {RETRIEVAL_DOCUMENTS}: document capture was off (it is opt-in)"
        )
    docs = _parse_content(r.attributes[RETRIEVAL_DOCUMENTS], RETRIEVAL_DOCUMENTS, where)
    if not isinstance(docs, list):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {RETRIEVAL_DOCUMENTS} is not a list")
    out: list[tuple[ChunkIdentity, str | None]] = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise _Unusable(NOT_OF_FORMAT, f"{where}: {RETRIEVAL_DOCUMENTS}[{i}] is not an object")
        metadata = d.get("metadata")
        identity = ChunkIdentity.of(
            d.get("id"), metadata.get(settings.chunk_id_key) if isinstance(metadata, dict) else None
        )
        if identity is None:
            raise _Unusable(
                NOT_OF_FORMAT,
                f"{where}: {RETRIEVAL_DOCUMENTS}[{i}] has no string id and no metadata.{settings.chunk_id_key}",
            )
        text = d.get("content") if isinstance(d.get("content"), str) else d.get("text")
        if isinstance(text, str):
            if text.strip() == REDACTED_PLACEHOLDER:
                raise _Unusable(
                    CONTENT_REDACTED, f"{where}: document {identity.resolve('')[0]!r} text is {REDACTED_PLACEHOLDER}"
                )
            out.append((identity, text))
        else:
            out.append((identity, None))
    return out


def _texts_from_prompt(texts: list[str], wanted: list[str], all_ids: list[str]) -> dict[str, tuple[str | None, str]]:
    """Each wanted chunk's text as the prompt shows it, found by its id: the id must open exactly one line of the
    prompt's messages as `[ID]` or `ID:`; the text runs from there to the first blank line, the next line opened
    that way by another retrieved id, or the end of that message, whichever comes first. (None, why) otherwise.
    The text is what the prompt holds, so a chunk the app cut is seen cut (span_truncated cannot show).
    One pass over the messages for all ids (a longer id wins where two could open the same line)."""
    ids = sorted(set(all_ids), key=lambda c: (-len(c), c))
    alternatives = "|".join(re.escape(c) for c in ids)
    opener = re.compile(
        r"^[ \t]*(?:\[(?P<b>" + alternatives + r")\]|(?P<c>" + alternatives + r"):)[ \t]*", re.MULTILINE
    )
    hits: dict[str, list[tuple[int, int]]] = {}  # id -> (text index, end of its opener)
    openers: list[list[tuple[int, str]]] = []  # per text: (start of an opener line, its id)
    for t, text in enumerate(texts):
        found = []
        for m in opener.finditer(text):
            chunk_id = m.group("b") if m.group("b") is not None else m.group("c")
            found.append((m.start(), chunk_id))
            hits.setdefault(chunk_id, []).append((t, m.end()))
        openers.append(found)
    out: dict[str, tuple[str | None, str]] = {}
    for chunk_id in wanted:
        places = hits.get(chunk_id, [])
        if len(places) != 1:
            out[chunk_id] = (
                None,
                "no text in the trace, and its id opens no line of the prompt"
                if not places
                else f"no text in the trace, and its id opens {len(places)} lines of the prompt",
            )
            continue
        t, begin = places[0]
        text = texts[t]
        end = len(text)
        blank = re.compile(r"\n[ \t]*\n").search(text, begin)
        if blank:
            end = blank.start()
        for at, other in openers[t]:
            if at >= begin and other != chunk_id:
                end = min(end, at)
                break
        found_text = text[begin:end].strip()
        out[chunk_id] = (
            (found_text, "prompt")
            if found_text
            else (None, "no text in the trace, and its section in the prompt is empty")
        )
    return out


ADAPTER = OtlpAdapter()
