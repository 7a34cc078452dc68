"""Langfuse observations as citegate-log/1 calls: GENERATION observations are the model calls, and
RETRIEVER observations give the chunks they were paired with.

Two layouts, told apart per line (docs/adapters.md, Langfuse):
- a page of the public observations API, `GET /api/public/v2/observations?fields=core,basic,io,metadata,model,prompt`:
  `{"data": [...], "meta": {...}}`, camelCase fields, ISO 8601 timestamps. A page saved as it came (one line) or
  pretty-printed: when the file's first non-blank line is not a JSON value by itself but opens one (`{` or `[`),
  the file's lines are joined and read as one JSON document, and every call in it is tagged with the document's
  first line. A bare list of API observations (the `data` array saved alone), and API observations one per line,
  are read the same way.
- the blob-storage export (`observations_v2/`, JSONL): one observation per line, snake_case fields,
  `parent_observation_id` "" for a root, timestamps `YYYY-MM-DD HH:MM:SS.ffffff` in UTC without an offset.

Fields used (checked against langfuse 5.0.4 `api/commons/types/observation_v2.py` and the export field reference):
id, traceId/trace_id, type, parentObservationId/parent_observation_id, startTime/start_time, endTime/end_time,
input, output, metadata, providedModelName/provided_model_name (the API model of langfuse 5.0.4 calls it `model`:
both are read). A record: request_id = the generation's id; logged_at = its startTime; answer_model =
providedModelName, else model; surface = metadata[surface_key] (a JSON-encoded string value, as the SDK writes
metadata attributes, is decoded), else default_surface; prompt = `input`, the messages the SDK captured (not the
request body sent): `{"messages": [...]}` as JSON (a dict input keeps only its `messages`, e.g. tools are dropped),
or the text of a string input, always with `prompt_reconstructed: true`; answer = the assistant message's content
(`output` as the OpenAI integration writes it: `{"role": "assistant", "content": ...}`, or a plain string); citations
= the list at settings.citations_path in that content's JSON, else the raw content (ingest puts it in answer_rejects).
promptName/promptVersion are not mapped (no config key names a profile for them): `auto` applies.

Pairing (`paired_retrievers`, the rule shared by every trace format: lib/ingest/adapters/traces.py): a generation's
retrieved chunks come from the RETRIEVER observations of the same trace in the same file that ended (endTime) at or
before the generation started, nearest common ancestor first (a sibling under the generation's parent before one
under its grandparent; one with no common ancestor in the file last), then the one that ended last first. Every such
retriever is used, in that order, its documents in their own order; rank = position (1-based). Chunk id =
metadata[chunk_id_key] when the document has it (a vector store gives `id` a UUID of its own; the prompt shows the
application's id), else its `id`; the other id is kept as `doc_id` (traces.ChunkIdentity); text =
`page_content`. Limits: a trace split over two files (API pages, export windows) is paired per file; a retriever
still running when the call started (parallel retrieval) does not count; a trace of several turns gives a later turn
the earlier turns' chunks too, after its own (a chunk cited from those is `dropped_before_prompt`, not
`fabricated_id`); a generation with no finished retriever is rejected (`retrieval_not_paired`), never given an empty
retrieval; a chunk id returned twice with the same text is kept once, with different texts the call is
`duplicate_chunk_id` (ingest).

What cannot be recovered is a reject (base.py): content_not_captured (no input or output), content_redacted (a field
or message that is exactly the SDK's mask fallback `<fully masked due to failed mask function>`, written when the
client's `mask` function raises, or OpenInference's `__REDACTED__`; a mask that returns other text is
indistinguishable from content), content_truncated (a JSON input, output or retriever output that ends before the
JSON does: the OpenTelemetry SDK cuts attribute values over OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT without a marker).
The API also cuts metadata values over 200 characters unless `expandMetadata` names the key: a long surface value
arrives cut, unmarked.

Hostile input: an observation that cannot be read is a reject of its own (a GENERATION's under its id; another's
makes its trace's generations unpairable), the rest of its page is read, and each generation is converted on its
own. A page line holds many observations, so a rejected one's reject row keeps only its own observation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from citegate_assets.lib.ingest.adapters.base import (
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
    LineReject,
)
from citegate_assets.lib.ingest.adapters.traces import (
    LLM,
    OTHER,
    RETRIEVER,
    ChunkIdentity,
    RecordBudget,
    Span,
    SpanTree,
    bounded_chunks,
    part_text,
)

NAME = "langfuse"
MASK_FALLBACK = "<fully masked due to failed mask function>"  # langfuse/_client/constants.py MASK_FALLBACK_VALUE
REDACTION_MARKERS = frozenset({MASK_FALLBACK, "__REDACTED__"})  # the SDK's, and OpenInference's HIDE_* value
_HEAD = re.compile(rb'\A\s*(\{\s*"(data|meta)"\s*:|\[\s*\{\s*"id"\s*:)')  # a page, or a bare list of observations
_OPENS = re.compile(rb'\A\s*(\{|\[|\{\s*"data"\s*:\s*\[)\s*\Z')  # a first line that only opens a document
_API_KEYS = ("id", "traceId", "type", "startTime")
_EXPORT_KEYS = ("id", "trace_id", "type", "start_time")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class _Bad(Exception):
    """A call that cannot be converted: (reason, detail)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Observation:
    line_no: int
    seq: int  # order within the file (a page holds many observations on its first line)
    id: str
    trace_id: str
    type: str
    parent_id: str | None
    start: datetime
    end: datetime | None
    input: Any  # the raw string as the API/export gives it, or an already parsed value; None when not set
    output: Any
    metadata: dict
    model: str | None
    raw: Any = field(default=None, repr=False, compare=False)  # the observation as exported: a reject row's part


class LangfuseAdapter:
    name = NAME

    def detect(self, first_line: bytes) -> bool:
        """A page or an observation on one line, or a first line that only opens a JSON document (`{`, `[`,
        `{"data": [`): a pretty-printed page. `detect_head` decides on more of the file when that is ambiguous."""
        if _OPENS.match(first_line):
            return True
        try:
            obj = json.loads(first_line)
        except (ValueError, RecursionError):
            return False
        return _kind(obj) is not None

    def detect_head(self, head: bytes) -> bool:
        """On the first few KiB of a file: a page (pretty-printed or not), a list of API observations, or a line."""
        first = head.split(b"\n", 1)[0]
        return bool(_HEAD.match(head)) or (not _OPENS.match(first) and self.detect(first))

    def convert(self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings) -> Iterator[Call | LineReject]:
        given = list(lines)
        read = _read_all(given)
        pairing = _Pairing(read.observations)
        pairing.unpairable = read.unpairable
        budget = RecordBudget(sum(len(raw) for _, raw in given))
        out: list[tuple[int, int, Call | LineReject]] = [(r.line_no, seq, r) for seq, r in read.rejects]
        for obs in read.observations:
            if obs.type == "GENERATION":
                out.append((obs.line_no, obs.seq, _call(obs, pairing, settings, budget)))
        for _, _, item in sorted(out, key=lambda t: (t[0], t[1])):
            yield item


ADAPTER = LangfuseAdapter()


# -- reading ---------------------------------------------------------------------------------------------------------


def _kind(obj: object) -> str | None:
    if isinstance(obj, dict):
        if isinstance(obj.get("data"), list):
            return "page"
        if all(k in obj for k in _API_KEYS):
            return "api"
        if all(k in obj for k in _EXPORT_KEYS):
            return "export"
    return None


@dataclass
class _Read:
    observations: list[Observation] = field(default_factory=list)
    rejects: list[tuple[int, Call | LineReject]] = field(default_factory=list)  # (seq, item)
    unpairable: dict[str, str] = field(default_factory=dict)  # trace -> why: an observation of it is unreadable


def _read(lines: list[tuple[int, bytes]]) -> tuple[list[Observation], list[Call | LineReject]]:
    """The observations of a file, and its rejects (lines, or observations that cannot be read)."""
    read = _read_all(lines)
    return read.observations, [item for _, item in read.rejects]


def _read_all(lines: list[tuple[int, bytes]]) -> _Read:
    read = _Read()
    first = next(((n, raw) for n, raw in lines if raw.strip()), None)
    if first is not None and _is_document_start(first[1]):
        doc_line = first[0]
        try:
            doc = json.loads(b"\n".join(raw for _, raw in lines))
        except (ValueError, RecursionError) as exc:
            detail = f"lines {doc_line}-{lines[-1][0]}: {str(exc)[:200]}"
            read.rejects.append((-1, LineReject(doc_line, INVALID_JSON, detail)))
            return read
        _add(doc, doc_line, read)
        return read
    for line_no, raw in lines:
        if not raw.strip():
            read.rejects.append((-1, LineReject(line_no, EMPTY_LINE, "blank line")))
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            read.rejects.append((-1, LineReject(line_no, INVALID_UTF8, f"not UTF-8 at byte {exc.start}")))
            continue
        except (ValueError, RecursionError) as exc:
            read.rejects.append((-1, LineReject(line_no, INVALID_JSON, str(exc)[:200])))
            continue
        _add(obj, line_no, read)
    return read


def _is_document_start(raw: bytes) -> bool:
    """The first line opens a JSON document without being one (a pretty-printed page)."""
    if raw.lstrip()[:1] not in (b"{", b"["):
        return False
    try:
        json.loads(raw)
    except (ValueError, RecursionError):
        return True
    return False


def _add(obj: object, line_no: int, read: _Read) -> None:
    kind = _kind(obj)
    if kind == "page" and isinstance(obj, dict):
        items, where = obj["data"], "data"
    elif isinstance(obj, list):
        items, where = obj, ""
    elif kind in ("api", "export"):
        items, where = [obj], None
    else:
        shape = type(obj).__name__ if not isinstance(obj, dict) else "object with keys " + ", ".join(list(obj)[:6])
        read.rejects.append((-1, LineReject(line_no, NOT_OF_FORMAT, f"not a Langfuse observation or page: {shape}")))
        return
    for i, item in enumerate(items):
        label = f"{where}[{i}]" if where is not None else "line"
        seq = len(read.observations) + len(read.rejects)
        try:
            read.observations.append(_observation(item, line_no, seq))
        except Exception as exc:  # noqa: BLE001 — one observation's fault is its own reject, the others are read
            reason, why = (exc.reason, exc.detail) if isinstance(exc, _Bad) else (NOT_OF_FORMAT, _describe(exc))
            detail = f"line {line_no}: {label}: {why}"[:500]
            part = part_text({"line": line_no, label: item})
            obs_id, trace_id, obs_type = (
                _field(item, k) for k in (("id", "id"), ("traceId", "trace_id"), ("type", "type"))
            )
            if obs_id is not None and (obs_type or "").upper() == "GENERATION":  # a call: rejected under its id
                read.rejects.append((seq, Call(line_no, obs_id, None, reason, detail, part=part)))
            else:
                read.rejects.append((seq, LineReject(line_no, reason, detail, part=part)))
                if trace_id is not None:  # perhaps a retriever, or a parent: the trace's calls cannot be paired
                    read.unpairable.setdefault(trace_id, f"an observation of its trace ({detail})")


def _field(item: object, names: tuple[str, str]) -> str | None:
    if not isinstance(item, dict):
        return None
    for name in names:
        value = item.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _describe(exc: Exception) -> str:
    return f"cannot be read: {type(exc).__name__}: {exc}"[:300]


def _observation(obj: object, line_no: int, seq: int) -> Observation:
    kind = _kind(obj)
    if kind not in ("api", "export") or not isinstance(obj, dict):
        raise _Bad(NOT_OF_FORMAT, "not an observation (needs id, traceId, type, startTime)")
    api = kind == "api"
    get = (lambda camel, snake: obj.get(camel)) if api else (lambda camel, snake: obj.get(snake))
    ids: list[str] = []
    for camel, snake in (("id", "id"), ("traceId", "trace_id"), ("type", "type")):
        value = get(camel, snake)
        if not isinstance(value, str) or not value:
            raise _Bad(NOT_OF_FORMAT, f"'{camel if api else snake}' is not a non-empty string")
        ids.append(value)
    parent = get("parentObservationId", "parent_observation_id")
    if parent is not None and not isinstance(parent, str):
        raise _Bad(NOT_OF_FORMAT, f"'{'parentObservationId' if api else 'parent_observation_id'}' is not a string")
    metadata = get("metadata", "metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise _Bad(NOT_OF_FORMAT, "'metadata' is not an object")
    model = get("providedModelName", "provided_model_name") or (obj.get("model") if api else None)
    start = _timestamp(get("startTime", "start_time"), "startTime" if api else "start_time", api)
    end_raw = get("endTime", "end_time")
    end = None if end_raw in (None, "") else _timestamp(end_raw, "endTime" if api else "end_time", api)
    return Observation(
        raw=obj,
        line_no=line_no,
        seq=seq,
        id=ids[0],
        trace_id=ids[1],
        type=ids[2].upper(),
        parent_id=parent or None,
        start=start,
        end=end,
        input=None if obj.get("input") == "" else obj.get("input"),
        output=None if obj.get("output") == "" else obj.get("output"),
        metadata=metadata or {},
        model=model if isinstance(model, str) and model else None,
    )


def _timestamp(value: object, field: str, api: bool) -> datetime:
    if not isinstance(value, str):
        raise _Bad(NOT_OF_FORMAT, f"'{field}' is not a timestamp string")
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise _Bad(NOT_OF_FORMAT, f"'{field}' is not an ISO 8601 timestamp: {value[:40]!r}") from None
    if at.tzinfo is None:
        if api:  # the API always writes an offset; without one the instant is unknown
            raise _Bad(NOT_OF_FORMAT, f"'{field}' has no UTC offset: {value[:40]!r}")
        at = at.replace(tzinfo=timezone.utc)  # the export's documented format: UTC, no offset
    return at.astimezone(timezone.utc)


# -- pairing (the shared rule of lib/ingest/adapters/traces.py)
# ---------------------------------------------------------------


def _ns(at: datetime) -> int:
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000  # exact: the formats carry at most microseconds


def _span(obs: Observation) -> Span:
    kind = LLM if obs.type == "GENERATION" else RETRIEVER if obs.type == "RETRIEVER" else OTHER
    return Span(obs.trace_id, obs.id, obs.parent_id, _ns(obs.start), None if obs.end is None else _ns(obs.end), kind)


class _Pairing:
    """The file's observation tree: which RETRIEVER observations feed a generation, in rank order; each
    retriever's documents are read once, whatever the number of generations it feeds."""

    def __init__(self, observations: list[Observation]) -> None:
        self.tree = SpanTree(_span(o) for o in observations)
        self.by_key: dict[tuple[str, str], Observation] = {}
        for o in observations:
            self.by_key.setdefault((o.trace_id, o.id), o)  # the first of a repeated id, as SpanTree keeps it
        self.documents: dict[tuple[str, str], list[Document] | _Bad] = {}
        self.unpairable: dict[str, str] = {}

    def paired(self, gen: Observation) -> tuple[list[Observation], int]:
        found = self.tree.paired(_span(gen))
        return [self.by_key[(s.trace_id, s.span_id)] for s in found.spans], found.left_out

    def retrievers(self, gen: Observation) -> list[Observation]:
        return self.paired(gen)[0]

    def docs(self, r: Observation, chunk_id_key: str) -> list[Document]:
        key = (r.trace_id, r.id)
        if key not in self.documents:
            try:
                self.documents[key] = _documents(r, chunk_id_key)
            except _Bad as bad:
                self.documents[key] = bad
            except Exception as exc:  # noqa: BLE001 — a retriever this adapter cannot read rejects the calls it feeds
                self.documents[key] = _Bad(NOT_OF_FORMAT, f"retriever {r.id} (line {r.line_no}): {_describe(exc)}")
        found = self.documents[key]
        if isinstance(found, _Bad):
            raise _Bad(found.reason, found.detail)
        return found


def paired_retrievers(gen: Observation, observations: list[Observation]) -> list[Observation]:
    """The RETRIEVER observations whose documents are this generation's retrieval, first rank first."""
    return _Pairing(observations).retrievers(gen)


# -- one call --------------------------------------------------------------------------------------------------------


def _call(gen: Observation, pairing: _Pairing, settings: AdapterSettings, budget: RecordBudget) -> Call:
    """One generation, converted; whatever its conversion raises is its own reject, keeping its own observation
    (a page line holds many: never theirs)."""
    retrievers, beyond = pairing.paired(gen)
    lines = tuple(sorted({r.line_no for r in retrievers} - {gen.line_no}))
    try:
        record = _record(gen, pairing, settings, retrievers, beyond)
        over = budget.charge(record)
        if over is not None:
            raise _Bad(RECORD_TOO_LARGE, f"generation {gen.id}: {over}")
    except _Bad as bad:
        reason, detail = bad.reason, bad.detail
    except Exception as exc:  # noqa: BLE001 — a shape this adapter did not expect: this call's reject only
        reason, detail = NOT_OF_FORMAT, f"generation {gen.id}: {_describe(exc)}"
    else:
        return Call(gen.line_no, gen.id, record, lines=lines)
    part = part_text({"line": gen.line_no, "observation": gen.raw})
    return Call(gen.line_no, gen.id, None, reason, f"line {gen.line_no}: {detail}"[:500], part=part, lines=lines)


def _record(
    gen: Observation, pairing: _Pairing, settings: AdapterSettings, retrievers: list[Observation], beyond: int
) -> dict:
    prompt, encoding = _prompt(gen.input, f"generation {gen.id} input")
    why = pairing.unpairable.get(gen.trace_id)
    if why is not None:
        raise _Bad(NOT_OF_FORMAT, f"generation {gen.id} cannot be paired: {why}")
    if not retrievers:
        raise _Bad(RETRIEVAL_NOT_PAIRED, f"no RETRIEVER of trace {gen.trace_id} ended before generation {gen.id}")
    left_out: list[dict] = []
    retrieved = _retrieved(retrievers, settings.chunk_id_key, pairing, beyond, left_out, prompt)
    answer = _answer(gen.output, f"generation {gen.id} output")
    record: dict[str, Any] = {
        "request_id": gen.id,
        "logged_at": gen.start.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "surface": _surface(gen, settings),
        "prompt": prompt,
        "prompt_encoding": encoding,
        "prompt_reconstructed": True,
        "retrieved": retrieved,
        "answer": answer,
        "citations": _citations(answer, settings.citations_path),
    }
    if left_out:
        record["retrieved_left_out"] = left_out
    if gen.model is not None:  # absent: ingest rejects the record as missing_field, as for any log line
        record["answer_model"] = gen.model
    return record


def _parse(value: Any, what: str) -> Any:
    """A captured field as JSON; a string that is no JSON stays text. Markers and cut JSON are rejects."""
    if value is None:
        raise _Bad(CONTENT_NOT_CAPTURED, f"{what} is not set")
    if not isinstance(value, str):
        _check_redacted(value, what)
        return value
    if value.strip() in REDACTION_MARKERS:
        raise _Bad(CONTENT_REDACTED, f"{what} is the redaction marker {value.strip()!r}")
    try:
        parsed = json.loads(value)
    except RecursionError:
        raise _Bad(NOT_OF_FORMAT, f"{what} nests too deeply") from None
    except json.JSONDecodeError as exc:
        if value.lstrip()[:1] in ("[", "{") and _ends_early(exc, value):
            raise _Bad(CONTENT_TRUNCATED, f"{what} ends inside its JSON after {len(value)} characters") from None
        return value
    _check_redacted(parsed, what)
    return parsed


def _ends_early(exc: json.JSONDecodeError, text: str) -> bool:
    """The decoder ran out of text: an unterminated string, or a value/delimiter expected at the very end."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip())


def _check_redacted(value: Any, what: str) -> None:
    """A whole value, or a message's content (string or text part), that is a redaction marker."""
    if isinstance(value, str):
        if value.strip() in REDACTION_MARKERS:
            raise _Bad(CONTENT_REDACTED, f"{what} is the redaction marker {value.strip()!r}")
        return
    messages = value.get("messages") if isinstance(value, dict) else value
    if isinstance(value, dict) and "content" in value:
        messages = [value]
    if not isinstance(messages, list):
        return
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        parts = content if isinstance(content, list) else [content]
        for part in parts:
            text = part.get("text") if isinstance(part, dict) else part
            if isinstance(text, str) and text.strip() in REDACTION_MARKERS:
                raise _Bad(CONTENT_REDACTED, f"{what}: message {i} is the redaction marker {text.strip()!r}")


def _prompt(value: Any, what: str) -> tuple[str, str]:
    parsed = _parse(value, what)
    if isinstance(parsed, str):
        return parsed, "text"
    messages = parsed.get("messages") if isinstance(parsed, dict) else parsed
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
        raise _Bad(NOT_OF_FORMAT, f"{what} is a JSON {type(parsed).__name__} that is no list of messages")
    return json.dumps({"messages": messages}, ensure_ascii=False), "json"


def _retrieved(
    retrievers: list[Observation],
    chunk_id_key: str,
    pairing: _Pairing,
    beyond: int,
    left_out: list[dict],
    prompt: str,
) -> list[dict]:
    chunks: list[tuple[str, tuple[str, str | None]]] = []
    seen: set[tuple[str, str]] = set()
    for r in retrievers:
        for doc in pairing.docs(r, chunk_id_key):
            chunk_id, store_id = doc.identity.resolve(prompt)
            if (chunk_id, doc.text) in seen:  # the same chunk from two retrievers of the group: once
                continue
            seen.add((chunk_id, doc.text))
            chunks.append((chunk_id, (doc.text, store_id)))
    kept = bounded_chunks(chunks, beyond, left_out)
    out = []
    for i, (chunk_id, (text, store_id)) in enumerate(kept, 1):
        entry: dict[str, Any] = {"chunk_id": chunk_id, "rank": i, "text": text}
        if store_id is not None:
            entry["doc_id"] = store_id
        out.append(entry)
    return out


@dataclass(frozen=True)
class Document:
    """A retriever document: its ids (chunked per call, by what the prompt shows) and its text."""

    identity: ChunkIdentity
    text: str


def _documents(r: Observation, chunk_id_key: str) -> list[Document]:
    """A retriever's documents, in order."""
    docs = _parse(r.output, f"retriever {r.id} output")
    if not isinstance(docs, list):
        raise _Bad(NOT_OF_FORMAT, f"retriever {r.id} output is not a list of documents")
    out = []
    for i, doc in enumerate(docs):
        where = f"retriever {r.id} output[{i}]"
        if not isinstance(doc, dict) or not isinstance(doc.get("page_content"), str):
            raise _Bad(NOT_OF_FORMAT, f"{where} is not a document with a string 'page_content'")
        text = doc["page_content"]
        if text.strip() in REDACTION_MARKERS:
            raise _Bad(CONTENT_REDACTED, f"{where}.page_content is the redaction marker {text.strip()!r}")
        metadata = doc.get("metadata")
        identity = ChunkIdentity.of(doc.get("id"), metadata.get(chunk_id_key) if isinstance(metadata, dict) else None)
        if identity is None:
            raise _Bad(NOT_OF_FORMAT, f"{where} has no 'id' and no metadata '{chunk_id_key}'")
        out.append(Document(identity, text))
    return out


def _answer(value: Any, what: str) -> str:
    """The assistant message's content: `{"role": "assistant", "content": ...}` or a plain string."""
    parsed = _parse(value, what)
    if isinstance(parsed, dict) and isinstance(parsed.get("content"), str):
        return parsed["content"]
    if isinstance(parsed, str):
        return parsed
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)  # ingest rejects its citations


def _citations(answer: str, path: str) -> object:
    """The list at `path` in the answer's JSON; the raw answer when it has none (ingest: answer_rejects)."""
    try:
        node: object = json.loads(answer)
    except (ValueError, RecursionError):
        return answer
    for key in [k for k in path.split(".") if k]:
        if not isinstance(node, dict) or key not in node:
            return answer
        node = node[key]
    return node if isinstance(node, list) else answer


def _surface(gen: Observation, settings: AdapterSettings) -> str:
    value = gen.metadata.get(settings.surface_key)
    if value is None or value == "":
        return settings.default_surface
    if isinstance(value, str) and value.startswith('"'):
        try:  # the SDK JSON-encodes each metadata attribute value
            decoded = json.loads(value)
        except ValueError:
            decoded = value
        value = decoded
    if not isinstance(value, str) or not value.strip():
        raise _Bad(NOT_OF_FORMAT, f"generation {gen.id} metadata '{settings.surface_key}' is not a non-empty string")
    if value.strip() in REDACTION_MARKERS:
        raise _Bad(CONTENT_REDACTED, f"generation {gen.id} metadata '{settings.surface_key}' is a redaction marker")
    return value
