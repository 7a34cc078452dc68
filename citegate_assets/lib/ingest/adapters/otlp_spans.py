"""OTLP JSON lines read into rows: each span and log record checked field by field (ids, times, typed attribute values),
a broken one kept with where and why."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from citegate_assets.lib.ingest.adapters.base import (
    EMPTY_LINE,
    INVALID_JSON,
    INVALID_UTF8,
    NOT_OF_FORMAT,
    LineReject,
)
from citegate_assets.lib.ingest.adapters.traces import (
    LLM,
    OTHER,
    RETRIEVER,
    Span,
    part_text,
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


def _read_file(lines: Iterable[tuple[int, bytes]]) -> _File:
    f = _File()
    order = 0
    for line_no, raw in lines:
        f.source_bytes += len(raw)
        order = _read_line(f, line_no, raw, order)
    return f


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
                operation = value.get("stringValue") if isinstance(value, dict) else None
                is_call = isinstance(operation, str) and operation in INFERENCE_OPERATIONS  # a list is unhashable
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
