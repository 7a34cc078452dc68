"""OpenInference span lines (Arize Phoenix's span export) read into spans: each line checked field by field, its
attributes flattened to dotted keys, a line that is no span kept as a reject with its line and reason."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from citegate_assets.lib.ingest.adapters.base import (
    EMPTY_LINE,
    INVALID_JSON,
    INVALID_UTF8,
    NOT_OF_FORMAT,
    LineReject,
)

REDACTED = "__REDACTED__"  # openinference.instrumentation.config.REDACTED_VALUE
JSON_MIME = "application/json"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DETAIL_MAX = 300


class _Reject(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail[:_DETAIL_MAX]


@dataclass
class Span:
    """One exported span, its attributes flattened to dotted keys."""

    line_no: int
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: str
    start: datetime | str  # a str holds why the timestamp is unusable
    end: datetime | str
    attrs: dict[str, Any] = field(repr=False)


def flatten_attributes(value: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Any nesting of span attributes as flat dotted keys; a `metadata` object stays whole under its key."""
    out = {} if out is None else out
    if isinstance(value, dict):
        if prefix == "metadata" or prefix.endswith(".metadata"):
            out[prefix] = value
            return out
        for key, sub in value.items():
            flatten_attributes(sub, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and any(isinstance(v, dict) for v in value):
        for i, sub in enumerate(value):
            flatten_attributes(sub, f"{prefix}.{i}", out)
    elif value is not None and prefix:
        out[prefix] = value
    return out


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Reject(NOT_OF_FORMAT, f"{what} is missing or not a string")
    return value


def _timestamp(value: Any, what: str) -> datetime | str:
    if not isinstance(value, str):
        return f"{what} is {'missing' if value is None else type(value).__name__}, not an ISO 8601 string"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return f"{what} {value[:40]!r} is not an ISO 8601 timestamp"
    if parsed.tzinfo is None:
        return f"{what} {value[:40]!r} has no UTC offset"
    return parsed.astimezone(timezone.utc)


def parse_span(line_no: int, raw: bytes) -> Span | LineReject:
    """One exported span, or why the line is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return LineReject(line_no, INVALID_UTF8, f"not UTF-8 at byte {exc.start}")
    if not text.strip():
        return LineReject(line_no, EMPTY_LINE, "blank line")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return LineReject(line_no, INVALID_JSON, str(exc)[:200])
    if not isinstance(obj, dict):
        return LineReject(line_no, NOT_OF_FORMAT, f"line holds a JSON {type(obj).__name__}, not a span object")
    try:
        return _span(line_no, obj)
    except _Reject as rej:
        return LineReject(line_no, rej.reason, f"line {line_no}: {rej.detail}")
    except Exception as exc:  # noqa: BLE001 — whatever is wrong with one span line, it is that line's reject
        return LineReject(line_no, NOT_OF_FORMAT, f"line {line_no}: {type(exc).__name__}: {exc}"[:_DETAIL_MAX])


def _trace_of(raw: bytes) -> str | None:
    """The trace id a line that is no readable span still names, if any: its trace's calls cannot be paired."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    context = obj.get("context")
    value = context.get("trace_id") if isinstance(context, dict) else obj.get("context.trace_id")
    return value if isinstance(value, str) and value else None


def _span(line_no: int, obj: dict) -> Span:
    context = obj.get("context")
    if isinstance(context, dict):
        trace_id, span_id = context.get("trace_id"), context.get("span_id")
    else:
        trace_id, span_id = obj.get("context.trace_id"), obj.get("context.span_id")
    trace_id = _text(trace_id, "context.trace_id")
    span_id = _text(span_id, "context.span_id")
    parent_id = obj.get("parent_id")
    if parent_id is not None and not isinstance(parent_id, str):
        raise _Reject(NOT_OF_FORMAT, f"span {span_id}: parent_id is {type(parent_id).__name__}, not a string")
    attrs: dict[str, Any] = {}
    if isinstance(obj.get("attributes"), dict):
        flatten_attributes(obj["attributes"], "", attrs)
    for key, value in obj.items():  # get_spans_dataframe columns
        if key.startswith("attributes.") and value is not None:
            flatten_attributes(value, key[len("attributes.") :], attrs)
    kind = obj.get("span_kind") or attrs.get("openinference.span.kind")
    kind = _text(kind, f"span {span_id}: span_kind")
    return Span(
        line_no=line_no,
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id or None,
        kind=kind.upper(),
        start=_timestamp(obj.get("start_time"), "start_time"),
        end=_timestamp(obj.get("end_time"), "end_time"),
        attrs=attrs,
    )


def _is_span_line(obj: Any) -> bool:
    if not isinstance(obj, dict):
        return False
    context = obj.get("context")
    has_ids = (isinstance(context, dict) and "span_id" in context and "trace_id" in context) or (
        "context.span_id" in obj and "context.trace_id" in obj
    )
    return has_ids and ("span_kind" in obj or "attributes" in obj or any(k.startswith("attributes.") for k in obj))


def _meta_get(attrs: dict[str, Any], prefix: str, key: str, where: str) -> Any:
    """metadata[key] whichever way the export holds `metadata`: a JSON string, an object, or flattened keys."""
    meta = attrs.get(prefix)
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except (ValueError, RecursionError):
            raise _Reject(NOT_OF_FORMAT, f"{where}: {prefix} is not JSON") from None
    if isinstance(meta, dict):
        return meta.get(key)
    if meta is not None:
        raise _Reject(NOT_OF_FORMAT, f"{where}: {prefix} is {type(meta).__name__}, not a JSON object")
    return attrs.get(f"{prefix}.{key}")


def _id_str(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _ns(value: datetime | str) -> int | None:
    if isinstance(value, str):
        return None
    return (value - _EPOCH) // timedelta(microseconds=1) * 1000
