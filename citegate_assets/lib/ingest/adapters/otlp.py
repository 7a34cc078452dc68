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
- Pairing: lib/ingest/adapters/traces.py (same trace, ended before the call started, nearest ancestor first, then
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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from citegate_assets.lib.ingest.adapters.base import (
    CONTENT_NOT_CAPTURED,
    CONTENT_REDACTED,
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
from citegate_assets.lib.ingest.adapters.otlp_content import (
    _check_redaction,
    _citations,
    _documents,
    _from_attributes,
    _from_events,
    _message_texts,
    _rfc3339,
    _surface,
    _texts_from_prompt,
)
from citegate_assets.lib.ingest.adapters.otlp_spans import (
    CHOICE_EVENT,
    DETAILS_EVENT,
    INPUT_MESSAGES,
    MESSAGE_EVENTS,
    REDACTED_PLACEHOLDER,
    STATUS_ERROR,
    SYSTEM_INSTRUCTIONS,
    _Event,
    _File,
    _get,
    _read_file,
    _SpanRow,
    _Unusable,
)
from citegate_assets.lib.ingest.adapters.traces import (
    LLM,
    MAX_ANCESTOR_STEPS,
    RETRIEVER,
    ChunkIdentity,
    RecordBudget,
    SpanTree,
    bounded_chunks,
    part_text,
)


@dataclass
class OtlpPartner:
    """What one otlp file offers the others of the landing folder: the GenAI events its log records carry, by
    (traceId, spanId), and its own inference spans (so a logs file can say whose events its lines hold)."""

    events: dict[tuple[str, str], list[_Event]]
    broken_events: dict[tuple[str, str], str]
    calls: frozenset[tuple[str, str]]
    holds_logs: bool


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


# --- retrieved chunks -----------------------------------------------------------------------------------------


ADAPTER = OtlpAdapter()
