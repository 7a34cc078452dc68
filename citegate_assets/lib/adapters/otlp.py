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
  nearest in time); ranks follow that order. Chunk id = the document's `id`, else `metadata[chunk_id_key]`.
  A call with no retrieval span paired is rejected (`retrieval_not_paired`), never given an empty retrieval
  (each of its citations would be a false fabricated_id); a paired retrieval span that failed (status ERROR)
  counts as paired and adds no document.
- request_id = `<traceId>/<spanId>` (a span id is only unique within its trace); logged_at = the span's start
  (RFC 3339 UTC, microseconds); answer_model = `gen_ai.response.model`, else `gen_ai.request.model`; surface =
  the span attribute `surface_key`, else that resource attribute, else resource `service.name` unless it is the
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
    RETRIEVAL_NOT_PAIRED,
    AdapterSettings,
    Call,
    LineReject,
)
from .traces import LLM, OTHER, RETRIEVER, Span, SpanTree

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
    """A line that is JSON but not OTLP/JSON; the message names the field at fault."""


class _Unusable(Exception):
    """A call that cannot be converted: (reason, detail)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass
class _SpanRow:
    line_no: int
    order: int  # position in the file, for source order within a line
    span: Span
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    name: str


@dataclass
class _Event:
    name: str
    body: Any
    time: int
    order: int


@dataclass
class _File:
    spans: list[_SpanRow] = field(default_factory=list)
    events: dict[tuple[str, str], list[_Event]] = field(default_factory=dict)
    line_rejects: list[LineReject] = field(default_factory=list)


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
        f = _File()
        order = 0
        for line_no, raw in lines:
            order = _read_line(f, line_no, raw, order)
        tree = SpanTree(row.span for row in f.spans)
        retrievers = {(r.span.trace_id, r.span.span_id): r for r in f.spans if r.span.kind == RETRIEVER}
        out: list[tuple[int, int, Call | LineReject]] = [(r.line_no, -1, r) for r in f.line_rejects]
        for row in f.spans:
            if row.span.kind == LLM:
                out.append((row.line_no, row.order, _call(row, f, tree, retrievers, settings)))
        out.sort(key=lambda t: (t[0], t[1]))
        for _, _, item in out:
            yield item


# --- reading lines ---------------------------------------------------------------------------------------------


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
    spans: list[_SpanRow] = []
    events: list[tuple[tuple[str, str], _Event]] = []
    try:
        if not isinstance(obj, dict):
            raise _Bad(f"line holds a JSON {type(obj).__name__}, not an ExportTraceServiceRequest object")
        if "resourceSpans" not in obj and "resourceLogs" not in obj:
            raise _Bad("no 'resourceSpans' (ExportTraceServiceRequest) or 'resourceLogs' (ExportLogsServiceRequest)")
        for ri, rs in enumerate(_list(obj, "resourceSpans", "")):
            where = f"resourceSpans[{ri}]"
            resource = _attributes(_obj(rs, "resource", where), f"{where}.resource")
            for si, ss in enumerate(_list(rs, "scopeSpans", where)):
                for pi, sp in enumerate(_list(ss, "spans", f"{where}.scopeSpans[{si}]")):
                    order += 1
                    spans.append(_span(sp, f"{where}.scopeSpans[{si}].spans[{pi}]", line_no, order, resource))
        for ri, rl in enumerate(_list(obj, "resourceLogs", "")):
            where = f"resourceLogs[{ri}]"
            for si, sl in enumerate(_list(rl, "scopeLogs", where)):
                for pi, lr in enumerate(_list(sl, "logRecords", f"{where}.scopeLogs[{si}]")):
                    order += 1
                    keyed = _log_event(lr, f"{where}.scopeLogs[{si}].logRecords[{pi}]", order)
                    if keyed is not None:
                        events.append(keyed)
    except _Bad as exc:
        f.line_rejects.append(LineReject(line_no, NOT_OF_FORMAT, str(exc)))
        return order
    f.spans.extend(spans)
    for key, event in events:
        f.events.setdefault(key, []).append(event)
    return order


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
            f"{where}.{key} is {json.dumps(value)[:60]}, not {pattern.pattern[-3:-1]} hex digits "
            "(OTLP/JSON writes ids as hex; protobuf's own JSON mapping would give base64)"
        )
    if set(value) == {"0"}:
        if required:
            raise _Bad(f"{where}.{key} is all zeros (an invalid id)")
        return None
    return value.lower()


def _nanos(obj: dict, key: str, where: str, required: bool) -> int | None:
    value = obj.get(key)
    if value is None or value == "0" or value == 0:
        if required:
            raise _Bad(f"{where}.{key} is missing")
        return None
    if isinstance(value, bool) or not ((isinstance(value, int)) or (isinstance(value, str) and _INT.fullmatch(value))):
        raise _Bad(f"{where}.{key} is {json.dumps(value)[:60]}, not an int64 (a decimal string in OTLP/JSON)")
    return int(value)


def _span(sp: Any, where: str, line_no: int, order: int, resource: dict[str, Any]) -> _SpanRow:
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
        raise _Bad(f"{where}.status.code is {json.dumps(code)[:40]}, not an integer enum")
    assert trace_id is not None and span_id is not None and start is not None
    op = attributes.get("gen_ai.operation.name")
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


def _log_event(lr: Any, where: str, order: int) -> tuple[tuple[str, str], _Event] | None:
    """A log record that is a GenAI event on a span, keyed by (traceId, spanId); None for any other record."""
    if not isinstance(lr, dict):
        raise _Bad(f"{where} is not an object")
    attributes = _attributes(lr, where)
    name = lr.get("eventName") or attributes.get("event.name")  # eventName: OTLP 1.5+; event.name before
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
    return (trace_id, span_id), _Event(name, body, time, order)


def _attributes(obj: dict, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(_list(obj, "attributes", where)):
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            raise _Bad(f"{where}.attributes[{i}] is not a {{key, value}} object")
        out.setdefault(kv["key"], _any_value(kv.get("value") or {}, f"{where}.attributes[{i}].value"))
    return out


def _any_value(value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise _Bad(f"{where} is not an AnyValue object")
    if not value:
        return None
    if len(value) != 1:
        raise _Bad(f"{where} has several value fields: {', '.join(sorted(value))[:80]}")
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


# --- one call -------------------------------------------------------------------------------------------------


def _call(
    row: _SpanRow,
    f: _File,
    tree: SpanTree,
    retrievers: dict[tuple[str, str], _SpanRow],
    settings: AdapterSettings,
) -> Call:
    request_id = f"{row.span.trace_id}/{row.span.span_id}"
    try:
        record = _record(row, f, tree, retrievers, settings, request_id)
    except _Unusable as exc:
        return Call(row.line_no, request_id, None, exc.reason, exc.detail)
    return Call(row.line_no, request_id, record)


def _record(
    row: _SpanRow,
    f: _File,
    tree: SpanTree,
    retrievers: dict[tuple[str, str], _SpanRow],
    settings: AdapterSettings,
    request_id: str,
) -> dict:
    attrs = row.attributes
    where = f"span {row.span.span_id}"
    _check_redaction(row.attributes, where)
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
    if not isinstance(model, str) or not model:
        raise _Unusable(NOT_OF_FORMAT, f"{where}: neither gen_ai.response.model nor gen_ai.request.model is set")
    request_model = attrs.get("gen_ai.request.model")
    events = sorted(f.events.get((row.span.trace_id, row.span.span_id), []), key=lambda e: (e.time, e.order))
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
            f"{where}: no message content (no {INPUT_MESSAGES} / {SYSTEM_INSTRUCTIONS} attribute or {DETAILS_EVENT}"
            + (", and its gen_ai.*.message events carry no content" if has_events else ", no gen_ai.*.message event")
            + "): message content capture was off",
        )
    for m in messages:
        if any(t.strip() == REDACTED_PLACEHOLDER for t in _message_texts(m)):
            raise _Unusable(CONTENT_REDACTED, f"{where}: a {m['role']} message is {REDACTED_PLACEHOLDER}")
    if answer is not None and answer.strip() == REDACTED_PLACEHOLDER:
        raise _Unusable(CONTENT_REDACTED, f"{where}: the answer is {REDACTED_PLACEHOLDER}")
    body = {"model": request_model if isinstance(request_model, str) and request_model else model, "messages": messages}
    texts = [t for m in messages for t in _message_texts(m)]
    retrieved, left_out = _retrieved(row, tree, retrievers, settings, texts)
    record: dict[str, Any] = {
        "request_id": request_id,
        "logged_at": _rfc3339(row.span.start),
        "surface": _surface(row, settings),
        "answer_model": model,
        "prompt": json.dumps(body, ensure_ascii=False),
        "prompt_encoding": "json",
        "prompt_reconstructed": True,
        "retrieved": retrieved,
        "answer": answer,
        "citations": _citations(answer, settings.citations_path),
    }
    if left_out:
        record["retrieved_left_out"] = left_out
    return record


def _check_redaction(attributes: dict[str, Any], where: str, keys: frozenset[str] = CONTENT_KEYS) -> None:
    for summary in REDACTION_SUMMARY_KEYS:
        value = attributes.get(summary)
        if isinstance(value, str):
            hit = sorted({k.strip() for k in value.split(",")} & keys)
            if hit:
                raise _Unusable(
                    CONTENT_REDACTED,
                    f"{where}: the collector's redaction processor changed {', '.join(hit)} ({summary})",
                )


def _parse_content(value: Any, key: str, where: str) -> Any:
    """A content attribute: structured (an arrayValue) or a JSON string; a JSON string cut short is truncated."""
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


def _surface(row: _SpanRow, settings: AdapterSettings) -> str:
    for source in (row.attributes, row.resource):
        value = source.get(settings.surface_key)
        if isinstance(value, str) and value.strip():
            return value
    service = row.resource.get("service.name")
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


def _retrieved(
    row: _SpanRow,
    tree: SpanTree,
    retrievers: dict[tuple[str, str], _SpanRow],
    settings: AdapterSettings,
    texts: list[str],
) -> tuple[list[dict], list[dict]]:
    paired = tree.pair(row.span)
    if not paired:
        raise _Unusable(
            RETRIEVAL_NOT_PAIRED,
            f"span {row.span.span_id}: no retrieval span of trace {row.span.trace_id} ended before the call started",
        )
    docs: list[tuple[str, str | None]] = []
    for span in paired:
        r = retrievers[(span.trace_id, span.span_id)]
        if r.status_code == STATUS_ERROR:
            continue  # a failed retrieval returned nothing
        docs.extend(_documents(r, settings))
    seen: set[str] = set()
    unique = []
    for chunk_id, text in docs:
        if chunk_id not in seen:  # the same chunk from two retrievers: its first (best) rank
            seen.add(chunk_id)
            unique.append((chunk_id, text))
    all_ids = [c for c, _ in unique]
    retrieved: list[dict] = []
    left_out: list[dict] = []
    for chunk_id, text in unique:
        if text is not None:
            retrieved.append({"chunk_id": chunk_id, "rank": len(retrieved) + 1, "text": text})
            continue
        found, why = _text_from_prompt(texts, chunk_id, all_ids)
        if found is None:
            left_out.append({"chunk_id": chunk_id, "why": why})
        else:
            retrieved.append({"chunk_id": chunk_id, "rank": len(retrieved) + 1, "text": found, "text_source": "prompt"})
    return retrieved, left_out


def _documents(r: _SpanRow, settings: AdapterSettings) -> list[tuple[str, str | None]]:
    where = f"retrieval span {r.span.span_id}"
    _check_redaction(r.attributes, where, frozenset({RETRIEVAL_DOCUMENTS}))
    if RETRIEVAL_DOCUMENTS not in r.attributes:
        raise _Unusable(
            CONTENT_NOT_CAPTURED, f"{where} has no {RETRIEVAL_DOCUMENTS}: document capture was off (it is opt-in)"
        )
    docs = _parse_content(r.attributes[RETRIEVAL_DOCUMENTS], RETRIEVAL_DOCUMENTS, where)
    if not isinstance(docs, list):
        raise _Unusable(NOT_OF_FORMAT, f"{where}: {RETRIEVAL_DOCUMENTS} is not a list")
    out: list[tuple[str, str | None]] = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict):
            raise _Unusable(NOT_OF_FORMAT, f"{where}: {RETRIEVAL_DOCUMENTS}[{i}] is not an object")
        metadata = d.get("metadata")
        chunk_id = d.get("id")
        if not (isinstance(chunk_id, str) and chunk_id.strip()) and isinstance(metadata, dict):
            chunk_id = metadata.get(settings.chunk_id_key)
        if not isinstance(chunk_id, str) or not chunk_id.strip():
            raise _Unusable(
                NOT_OF_FORMAT,
                f"{where}: {RETRIEVAL_DOCUMENTS}[{i}] has no string id and no metadata.{settings.chunk_id_key}",
            )
        text = d.get("content") if isinstance(d.get("content"), str) else d.get("text")
        if isinstance(text, str):
            if text.strip() == REDACTED_PLACEHOLDER:
                raise _Unusable(CONTENT_REDACTED, f"{where}: document {chunk_id!r} text is {REDACTED_PLACEHOLDER}")
            out.append((chunk_id.strip(), text))
        else:
            out.append((chunk_id.strip(), None))
    return out


def _marker(chunk_id: str) -> str:
    return r"^[ \t]*(?:\[" + re.escape(chunk_id) + r"\]|" + re.escape(chunk_id) + r":)[ \t]*"


def _text_from_prompt(texts: list[str], chunk_id: str, all_ids: list[str]) -> tuple[str | None, str]:
    """A chunk's text as the prompt shows it, found by its id: the id must open exactly one line of the prompt's
    messages as `[ID]` or `ID:`; the text runs from there to the first blank line, the next line opened that
    way by another retrieved id, or the end of that message, whichever comes first. (None, why) otherwise.
    The text is what the prompt holds, so a chunk the app cut is seen cut (span_truncated cannot show)."""
    pattern = re.compile(_marker(chunk_id), re.MULTILINE)
    hits = [(t, m) for t in texts for m in pattern.finditer(t)]
    if len(hits) != 1:
        return None, (
            "no text in the trace, and its id opens no line of the prompt"
            if not hits
            else f"no text in the trace, and its id opens {len(hits)} lines of the prompt"
        )
    text, m = hits[0]
    rest = text[m.end() :]
    end = len(rest)
    blank = re.search(r"\n[ \t]*\n", rest)
    if blank:
        end = blank.start()
    for other in all_ids:
        if other != chunk_id:
            nxt = re.search(_marker(other), rest, re.MULTILINE)
            if nxt and nxt.start() < end:
                end = nxt.start()
    found = rest[:end].strip()
    if not found:
        return None, "no text in the trace, and its section in the prompt is empty"
    return found, "prompt"


ADAPTER = OtlpAdapter()
