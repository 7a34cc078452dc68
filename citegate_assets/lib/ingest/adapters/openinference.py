"""OpenInference spans as exported from Arize Phoenix: one span per line, LLM calls out.

Layouts read (all three may be mixed in a file; every one has `context.span_id` and `context.trace_id`, nested
under `context` or as flat keys, and `parent_id`, `span_kind`, `start_time`, `end_time`):
- Phoenix's span list, `GET /v1/projects/{id}/spans` (`Client().spans.get_spans()`), one span object per line:
  `"attributes": {...}` with flattened dotted keys (`retrieval.documents.0.document.id`); Phoenix stores `metadata`
  and `document.metadata` as objects, so they come back flattened too (`metadata.surface`);
- `get_spans_dataframe()` rows written with `to_json(orient="records", lines=True, date_format="iso")`: one
  `attributes.<key>` column per semantic convention, lists of documents/messages as lists of objects
  (`attributes.retrieval.documents: [{"document.id": ...}]`), metadata as an object; null columns are absent values;
- the OpenTelemetry attributes as the instrumentors set them (`openinference.span.kind`, `metadata` a JSON string).
Attributes are flattened to dotted keys whatever the nesting, so `llm.input_messages.0.message.role` is found in
each. Timestamps must be ISO 8601 with an offset (pandas' default epoch numbers are refused, never guessed at).

An LLM span is one call (request_id = its `context.span_id`, logged_at = its `start_time` in UTC), unless it
wraps another LLM span (see `model_calls`):
- prompt: `input.value` when `input.mime_type` is application/json and it decodes as a request body that
  lib/ingest/containers.py reads (OpenAI chat/Responses/completions, Anthropic Messages); `prompt_reconstructed: true`,
  because it is the SDK's request parameters serialized by the instrumentor (`json.dumps(json_data)`), not the
  bytes the HTTP client sent: equal in content to the wire body on the fixtures, but not in bytes (so not its
  sha256), and without `extra_body`. Else a body rebuilt from `llm.input_messages.<i>.message.role|content|contents`
  (or `llm.prompts`), also reconstructed. What the tracer hid or cut is a call reject, never a guess:
  `__REDACTED__` in input.value (OPENINFERENCE_HIDE_INPUTS), in a rebuilt message (HIDE_INPUT_TEXT), in
  output.value (HIDE_OUTPUTS) or in a paired document (HIDE_RETRIEVAL_DOCUMENTS) is content_redacted; a JSON
  input.value that ends mid-value (an attribute length limit: the OTel SDK cuts without a marker) is
  content_truncated; a JSON input.value that is no request body, with no input messages, is prompt_undecodable;
  no JSON input.value and no input messages (HIDE_INPUT_MESSAGES on a span whose input.value is text) is
  content_not_captured.
- answer_model: `llm.model_name`, else the request body's `model`.
- answer: the text of `output.value` (an OpenAI chat/Responses or Anthropic Messages response object; else
  `llm.output_messages.0.message.content`; else `output.value` as text). citations: Anthropic native citations
  when output.value is a Message carrying them (openinference-instrumentation-anthropic), verified against
  input.value by lib/ingest/adapters/anthropic.py (`location_mismatch`); else the list at AdapterSettings.citations_path
  in the answer's JSON; when there is none, the raw text, which ingest puts in answer_rejects.
- surface: AdapterSettings.surface_key as a span attribute or a `metadata` key, on the LLM span or else its
  nearest ancestor span that has one; else AdapterSettings.default_surface.
- retrieved: see `pair_retrievers`. Chunk id = metadata[AdapterSettings.chunk_id_key] when the document has it,
  else `document.id` (traces.ChunkIdentity; the other id is kept as `doc_id`; LangChain's instrumentor emits no
  document.id); text = `document.content`; rank = position, 1-based, across
  the paired spans in order. With no retriever paired, an Anthropic request's citable blocks are the retrieved
  chunks (as lib/ingest/adapters/anthropic.py takes them), whether its answer cites them natively or in JSON; with
  neither, the call is rejected (`retrieval_not_paired`), never given an empty retrieval (each of its citations
  would be a false fabricated_id). A paired RETRIEVER span with no documents is an empty retrieval, no reject.

What is not read: `llm.prompt_template.*` (the surface's template applies), RERANKER spans, `document.score`.
The whole file is read before pairing, so a file's spans are held in memory at once. A line that is no readable
span is a reject of its own (and the calls of the trace it names cannot be paired); each call is converted on
its own, whatever its conversion raises being its reject.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from citegate_assets.lib.ingest.adapters import traces
from citegate_assets.lib.ingest.adapters.base import (
    CONTENT_NOT_CAPTURED,
    CONTENT_REDACTED,
    CONTENT_TRUNCATED,
    DUPLICATE_CHUNK_ID,
    INVALID_RETRIEVED,
    INVALID_TIMESTAMP,
    MISSING_FIELD,
    NOT_OF_FORMAT,
    PROMPT_UNDECODABLE,
    RECORD_TOO_LARGE,
    RETRIEVAL_NOT_PAIRED,
    AdapterSettings,
    Call,
    LineReject,
)
from citegate_assets.lib.ingest.adapters.openinference_spans import (
    _DETAIL_MAX,
    JSON_MIME,
    REDACTED,
    Span,
    _id_str,
    _is_span_line,
    _meta_get,
    _ns,
    _Reject,
    _trace_of,
    parse_span,
)
from citegate_assets.lib.ingest.containers import PromptDecodeError, decode_body

# --- reading a line ------------------------------------------------------------------------------------------


# --- metadata and the surface --------------------------------------------------------------------------------


class _Trace:
    """The spans of one file, by (trace_id, span_id), with lib/ingest/adapters/traces.py's tree over them. What a call
    needs of its ancestors (its surface, whether an LLM span wraps another) is found once per span, memoized, so a
    deep chain of spans costs its length, not its length per call."""

    def __init__(self, spans: list[Span]) -> None:
        self.by_id: dict[tuple[str, str], Span] = {}
        self.retrievers: dict[str, list[Span]] = {}
        self.nodes: dict[tuple[str, str], traces.Span] = {}
        self.bad_retriever: dict[str, Span] = {}  # trace -> its first RETRIEVER span whose end_time is unusable
        self.unpairable: dict[str, str] = {}  # trace -> why: a line of it is no readable span
        self.documents: dict[tuple[str, str], list[tuple[traces.ChunkIdentity, str]] | _Reject] = {}
        for s in spans:
            if s.kind == "RETRIEVER":
                self.retrievers.setdefault(s.trace_id, []).append(s)
                if isinstance(s.end, str):
                    self.bad_retriever.setdefault(s.trace_id, s)
            kind = {"LLM": traces.LLM, "RETRIEVER": traces.RETRIEVER}.get(s.kind, traces.OTHER)
            node = traces.Span(s.trace_id, s.span_id, s.parent_id, _ns(s.start) or 0, _ns(s.end), kind)
            self.nodes.setdefault((s.trace_id, s.span_id), node)
            self.by_id.setdefault((s.trace_id, s.span_id), s)
        self.tree = traces.SpanTree(self.nodes.values())
        self._surface: dict[tuple[str, str], Span | None] = {}

    def parent(self, span: Span) -> Span | None:
        up = self.tree.parent(span.trace_id, span.span_id)
        return self.by_id.get((span.trace_id, up)) if up is not None else None

    def ancestors(self, span: Span) -> list[Span]:
        """The ancestor spans the file holds, nearest first."""
        ids = self.tree.ancestors(self.nodes[(span.trace_id, span.span_id)])
        return [s for p in ids if (s := self.by_id.get((span.trace_id, p))) is not None]

    def surface(self, span: Span, settings: AdapterSettings) -> str:
        holder = self._surface_holder(span, settings)
        if holder is None:
            return settings.default_surface
        where = f"span {holder.span_id} (line {holder.line_no})"
        value = _surface_value(holder, settings, where)
        if not isinstance(value, str) or not value.strip():
            raise _Reject(NOT_OF_FORMAT, f"{where}: surface {settings.surface_key!r} is not a non-empty string")
        return value

    def _surface_holder(self, span: Span, settings: AdapterSettings) -> Span | None:
        """The span itself or its nearest ancestor that names a surface (memoized along the way up)."""
        path: list[Span] = []
        node: Span | None = span
        found: Span | None = None
        while node is not None:
            key = (node.trace_id, node.span_id)
            if key in self._surface:
                found = self._surface[key]
                break
            path.append(node)
            if _surface_value(node, settings, f"span {node.span_id} (line {node.line_no})") is not None:
                found = node
                break
            node = self.parent(node)
        for visited in path:
            self._surface[(visited.trace_id, visited.span_id)] = found
        return found


def _surface_value(span: Span, settings: AdapterSettings, where: str) -> Any:
    key = traces.surface_key_of(span.attrs, settings.surface_key)
    value = span.attrs.get(key) if key else None
    if value is None:
        value = _meta_get(span.attrs, "metadata", settings.surface_key, where)
    return value


# --- pairing -------------------------------------------------------------------------------------------------


def pair_retrievers(trace: _Trace, call: Span) -> list[Span]:
    """The RETRIEVER spans whose documents are the call's retrieved chunks, in rank order: the shared rule of
    lib/ingest/adapters/traces.py (the RETRIEVER spans of the call's trace that ended at or before the call started,
    nearest common ancestor with the call first, then the one that ended last; every one of them is used).

    So a retriever the call runs inside, or one that ran after it, never counts; LlamaIndex's two spans per
    retrieve() (`retrieve` and its child `_retrieve`, which holds no documents) both pair, their chunks once.
    Limits: spans are paired by time and tree position only (no attribute links a RETRIEVER to an LLM span);
    two retrieval rounds in one trace both count for the later call; a reranker's output is not read.
    """
    if isinstance(call.start, str):
        return []
    paired = trace.tree.pair(trace.nodes[(call.trace_id, call.span_id)])
    return [trace.by_id[(r.trace_id, r.span_id)] for r in paired]


def _paired(trace: _Trace, call: Span) -> traces.Paired:
    if isinstance(call.start, str):
        return traces.Paired([], 0)
    return trace.tree.paired(trace.nodes[(call.trace_id, call.span_id)])


def _documents(retriever: Span, settings: AdapterSettings) -> list[tuple[traces.ChunkIdentity, str]]:
    prefix = "retrieval.documents."
    indexes = sorted({int(k[len(prefix) :].split(".", 1)[0]) for k in retriever.attrs if _doc_key(k, prefix)})
    out = []
    for i in indexes:
        base = f"{prefix}{i}.document"
        where = f"retriever span {retriever.span_id} (line {retriever.line_no}) document {i}"
        identity = traces.ChunkIdentity.of(
            _id_str(retriever.attrs.get(f"{base}.id")),
            _id_str(_meta_get(retriever.attrs, f"{base}.metadata", settings.chunk_id_key, where)),
        )
        if identity is None:
            raise _Reject(
                INVALID_RETRIEVED,
                f"{where}: no document.id and no metadata key {settings.chunk_id_key!r} ([adapters] chunk_id_key)",
            )
        text = retriever.attrs.get(f"{base}.content")
        if text == REDACTED:
            raise _Reject(
                CONTENT_REDACTED, f"{where}: document.content is {REDACTED} (OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS)"
            )
        if not isinstance(text, str):
            raise _Reject(CONTENT_NOT_CAPTURED, f"{where}: no document.content")
        out.append((identity, text))
    return out


def _doc_key(key: str, prefix: str) -> bool:
    return key.startswith(prefix) and key[len(prefix) :].split(".", 1)[0].isdigit()


def _retrieved(
    trace: _Trace, call: Span, settings: AdapterSettings, paired: traces.Paired, left_out: list[dict], prompt: str
) -> list[dict] | None:
    """The chunks of the paired RETRIEVER spans in rank order (bounded: lib/ingest/adapters/traces.py); None when no
    RETRIEVER span is paired."""
    if not paired.spans:
        return None
    seen: dict[str, str] = {}
    chunks: list[tuple[str, str]] = []
    store_ids: dict[str, str] = {}
    for node in paired.spans:
        for identity, text in _documents_once(trace, trace.by_id[(node.trace_id, node.span_id)], settings):
            chunk_id, store_id = identity.resolve(prompt)
            if store_id is not None:
                store_ids.setdefault(chunk_id, store_id)
            if chunk_id in seen:
                if seen[chunk_id] != text:
                    raise _Reject(
                        DUPLICATE_CHUNK_ID,
                        f"chunk {chunk_id!r} comes back from two paired retrievers with different texts",
                    )
                continue  # the same chunk from two paired retrievers: kept once, at its first rank
            seen[chunk_id] = text
            chunks.append((chunk_id, text))
    kept = traces.bounded_chunks(chunks, paired.left_out, left_out)
    out: list[dict] = []
    for i, (chunk_id, text) in enumerate(kept, 1):
        entry = {"chunk_id": chunk_id, "rank": i, "text": text}
        if chunk_id in store_ids:
            entry["doc_id"] = store_ids[chunk_id]
        out.append(entry)
    return out


def _documents_once(
    trace: _Trace, retriever: Span, settings: AdapterSettings
) -> list[tuple[traces.ChunkIdentity, str]]:
    """A retriever's documents, read once for all the calls it feeds (a reject is remembered as well)."""
    key = (retriever.trace_id, retriever.span_id)
    if key not in trace.documents:
        try:
            trace.documents[key] = _documents(retriever, settings)
        except _Reject as rej:
            trace.documents[key] = rej
        except Exception as exc:  # noqa: BLE001 — a retriever this adapter cannot read rejects the calls it feeds
            where = f"retriever span {retriever.span_id} (line {retriever.line_no})"
            trace.documents[key] = _Reject(NOT_OF_FORMAT, f"{where}: {type(exc).__name__}: {exc}")
    found = trace.documents[key]
    if isinstance(found, _Reject):
        raise _Reject(found.reason, found.detail)
    return found


# --- the prompt ----------------------------------------------------------------------------------------------


def _prompt(span: Span) -> tuple[str, dict | None]:
    """The request body as JSON text, and the parsed input.value when it is one."""
    attrs = span.attrs
    value, mime = attrs.get("input.value"), attrs.get("input.mime_type")
    where = f"LLM span {span.span_id}"
    if value == REDACTED:
        raise _Reject(CONTENT_REDACTED, f"{where}: input.value is {REDACTED} (OPENINFERENCE_HIDE_INPUTS)")
    problem = None
    if isinstance(value, str) and mime == JSON_MIME:
        try:
            body = json.loads(value)
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, json.JSONDecodeError) and exc.pos >= len(value.rstrip()):
                # cut by a length limit; its input messages may be cut by the same limit without a trace
                raise _Reject(
                    CONTENT_TRUNCATED, f"{where}: input.value ends mid-JSON at character {exc.pos}: cut"
                ) from None
            body, problem = None, f"not JSON: {str(exc)[:120]}"
        if problem is None:
            try:
                if isinstance(body, dict) and decode_body(value, "json").messages:
                    return value, body
                problem = "decodes to no message"
            except PromptDecodeError as exc:
                problem = str(exc)[:160]
    rebuilt = _rebuilt_body(span)
    if rebuilt is not None:
        return json.dumps(rebuilt, ensure_ascii=False), None
    if problem is not None:
        raise _Reject(PROMPT_UNDECODABLE, f"{where}: input.value is no request body ({problem}), no input messages")
    raise _Reject(
        CONTENT_NOT_CAPTURED,
        f"{where}: no JSON input.value and no llm.input_messages (OPENINFERENCE_HIDE_INPUT_MESSAGES?)",
    )


def _rebuilt_body(span: Span) -> dict | None:
    """An OpenAI chat body from llm.input_messages, or a completions body from llm.prompts."""
    attrs, where = span.attrs, f"LLM span {span.span_id}"
    prefix = "llm.input_messages."
    indexes = sorted({int(k[len(prefix) :].split(".", 1)[0]) for k in attrs if _doc_key(k, prefix)})
    if not indexes:
        prompts = attrs.get("llm.prompts")
        if isinstance(prompts, list) and prompts and all(isinstance(p, str) for p in prompts):
            if REDACTED in prompts:
                raise _Reject(CONTENT_REDACTED, f"{where}: llm.prompts is {REDACTED} (OPENINFERENCE_HIDE_PROMPTS)")
            return {"prompt": prompts}
        return None
    messages = []
    for i in indexes:
        base = f"{prefix}{i}.message"
        role = attrs.get(f"{base}.role")
        if not isinstance(role, str) or not role:
            raise _Reject(NOT_OF_FORMAT, f"{where}: {base}.role is missing")
        content = attrs.get(f"{base}.content")
        if content is None:
            parts = []
            cprefix = f"{base}.contents."
            for j in sorted({int(k[len(cprefix) :].split(".", 1)[0]) for k in attrs if _doc_key(k, cprefix)}):
                part = f"{cprefix}{j}.message_content"
                if attrs.get(f"{part}.type") == "text" and isinstance(attrs.get(f"{part}.text"), str):
                    parts.append({"type": "text", "text": attrs[f"{part}.text"]})
                else:  # an image or other part: kept as such, skipped by the decoder as it is for any body
                    parts.append({"type": str(attrs.get(f"{part}.type") or "unknown")})
            content = parts
        if content == REDACTED or (isinstance(content, list) and any(p.get("text") == REDACTED for p in content)):
            raise _Reject(CONTENT_REDACTED, f"{where}: {base} content is {REDACTED} (OPENINFERENCE_HIDE_INPUT_TEXT)")
        if not isinstance(content, (str, list)):
            raise _Reject(NOT_OF_FORMAT, f"{where}: {base}.content is {type(content).__name__}, not text")
        messages.append({"role": role, "content": content})
    return {"messages": messages}


# --- the answer ----------------------------------------------------------------------------------------------


def _response_text(body: Any) -> str | None:
    """The answer text of an OpenAI chat / Responses or Anthropic Messages response object."""
    if not isinstance(body, dict):
        return None
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            return message["content"]
        if isinstance(choices[0].get("text"), str):  # completions
            return choices[0]["text"]
    if isinstance(body.get("output"), list):  # Responses
        texts = [
            part["text"]
            for item in body["output"]
            if isinstance(item, dict) and item.get("type") == "message" and isinstance(item.get("content"), list)
            for part in item["content"]
            if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str)
        ]
        return "".join(texts) if texts else None
    if body.get("type") == "message" and isinstance(body.get("content"), list):  # Anthropic Messages
        texts = [b["text"] for b in body["content"] if isinstance(b, dict) and b.get("type") == "text"]
        return "".join(t for t in texts if isinstance(t, str)) if texts else None
    return None


def _output_body(span: Span) -> Any:
    value = span.attrs.get("output.value")
    if value == REDACTED:
        raise _Reject(
            CONTENT_REDACTED, f"LLM span {span.span_id}: output.value is {REDACTED} (OPENINFERENCE_HIDE_OUTPUTS)"
        )
    if isinstance(value, str) and span.attrs.get("output.mime_type") == JSON_MIME:
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return None
    return None


def _native_citations(
    span: Span, output: Any, prompt: str, request: dict | None, settings: AdapterSettings
) -> tuple[str, list, list]:
    """(answer, citations, citable blocks) of an Anthropic Message carrying native citations, which
    lib/ingest/adapters/anthropic.py verifies against the request body (here: input.value); empty citations and blocks
    when the output is no such Message."""
    if not (isinstance(output, dict) and output.get("type") == "message" and isinstance(output.get("content"), list)):
        return "", [], []
    where = f"LLM span {span.span_id}: output.value"
    # only for Anthropic Messages: a broken anthropic module leaves the rest working
    from citegate_assets.lib.ingest.adapters import anthropic

    try:
        answer, texts = anthropic.answer_texts(output["content"])
        if not any(block.get("citations") for _, _, block in texts):
            return answer, [], []
        if request is None:  # rebuilt from messages: the document blocks the citations point into are not there
            raise _Reject(CONTENT_NOT_CAPTURED, f"{where} has native citations, but input.value holds no request body")
        blocks = anthropic.citable_blocks(decode_body(prompt, "json").messages, settings)
        return answer, anthropic.checked_citations(texts, answer, blocks), blocks
    except anthropic.NotOfFormat as exc:
        raise _Reject(NOT_OF_FORMAT, f"{where}: {exc}") from None
    except PromptDecodeError as exc:
        raise _Reject(PROMPT_UNDECODABLE, f"LLM span {span.span_id}: {exc}"[:_DETAIL_MAX]) from None


def _request_blocks(span: Span, prompt: str, settings: AdapterSettings) -> list:
    """The citable blocks (Anthropic documents, search results) of a request body, in the order sent."""
    from citegate_assets.lib.ingest.adapters import anthropic

    try:
        return anthropic.citable_blocks(decode_body(prompt, "json").messages, settings)
    except anthropic.NotOfFormat as exc:
        raise _Reject(NOT_OF_FORMAT, f"LLM span {span.span_id}: input.value: {exc}") from None
    except PromptDecodeError as exc:
        raise _Reject(PROMPT_UNDECODABLE, f"LLM span {span.span_id}: {exc}"[:_DETAIL_MAX]) from None


def _answer(span: Span, body: Any) -> str | None:
    attrs, where = span.attrs, f"LLM span {span.span_id}"
    text = _response_text(body)
    if text is not None:
        return text
    value = attrs.get("output.value")
    message = attrs.get("llm.output_messages.0.message.content")
    if message == REDACTED:
        raise _Reject(CONTENT_REDACTED, f"{where}: output message is {REDACTED} (OPENINFERENCE_HIDE_OUTPUT_TEXT)")
    if isinstance(message, str):
        return message
    return value if isinstance(value, str) else None


def _citations(answer: str | None, path: str) -> Any:
    """The list at `path` in the answer's JSON; else the raw answer (ingest records why in answer_rejects)."""
    if answer is None:
        return ""
    try:
        node: Any = json.loads(answer)
    except (ValueError, RecursionError):
        return answer
    for key in path.split(".") if path else []:
        if not isinstance(node, dict) or key not in node:
            return answer
        node = node[key]
    return node if isinstance(node, list) else answer


# --- the adapter ---------------------------------------------------------------------------------------------


def _call(trace: _Trace, span: Span, settings: AdapterSettings, budget: traces.RecordBudget) -> Call:
    """One call, converted; whatever its conversion raises is its own reject. Its line holds it alone (one span per
    line), so a reject row keeps that line."""
    paired = _paired(trace, span)
    lines = tuple(sorted({r.line_no for n in paired.spans if (r := trace.by_id.get((n.trace_id, n.span_id)))}))
    lines = tuple(n for n in lines if n != span.line_no)
    try:
        record = _record(trace, span, settings, paired)
        over = budget.charge(record)
        if over is not None:
            raise _Reject(RECORD_TOO_LARGE, f"LLM span {span.span_id}: {over}")
    except _Reject as rej:
        return Call(span.line_no, span.span_id, None, rej.reason, f"line {span.line_no}: {rej.detail}", lines=lines)
    except Exception as exc:  # noqa: BLE001 — a shape this adapter did not expect: this call's reject only
        detail = f"line {span.line_no}: LLM span {span.span_id}: cannot be read: {type(exc).__name__}: {exc}"
        return Call(span.line_no, span.span_id, None, NOT_OF_FORMAT, detail[:_DETAIL_MAX], lines=lines)
    return Call(span.line_no, span.span_id, record, lines=lines)


def _record(trace: _Trace, span: Span, settings: AdapterSettings, paired: traces.Paired) -> dict:
    if isinstance(span.start, str):
        raise _Reject(INVALID_TIMESTAMP, f"LLM span {span.span_id}: {span.start}")
    bad = trace.bad_retriever.get(span.trace_id)
    if bad is not None:
        raise _Reject(
            INVALID_TIMESTAMP,
            f"retriever span {bad.span_id} (line {bad.line_no}) of this trace: {bad.end}; cannot pair its chunks",
        )
    why = trace.unpairable.get(span.trace_id)
    if why is not None:
        raise _Reject(NOT_OF_FORMAT, f"LLM span {span.span_id}: cannot be paired: {why}")
    prompt, body = _prompt(span)
    model = span.attrs.get("llm.model_name")
    if not isinstance(model, str) or not model:
        model = body.get("model") if body is not None else None
    if not isinstance(model, str) or not model:
        raise _Reject(MISSING_FIELD, f"LLM span {span.span_id}: no llm.model_name and no model in input.value")
    output = _output_body(span)
    native, citations, blocks = _native_citations(span, output, prompt, body, settings)
    answer = native if citations else _answer(span, output)
    left_out: list[dict] = []
    retrieved = _retrieved(trace, span, settings, paired, left_out, prompt)
    if retrieved is None and not blocks and body is not None:  # the request's own documents, cited or not
        blocks = _request_blocks(span, prompt, settings)
    if not retrieved and blocks:  # no retriever span paired: the request's citable blocks, in the order sent
        retrieved = [{"chunk_id": b.chunk_id, "rank": b.rank, "text": b.text} for b in blocks if b.readable]
    if retrieved is None:  # no retriever paired, no citable block in the request: never an empty retrieval
        raise _Reject(
            RETRIEVAL_NOT_PAIRED,
            f"LLM span {span.span_id}: no RETRIEVER span of trace {span.trace_id} ended before the call started,"
            " and the request holds no citable document or search result block",
        )
    record = {
        "request_id": span.span_id,
        "logged_at": span.start.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "surface": trace.surface(span, settings),
        "answer_model": model,
        "prompt": prompt,
        "prompt_encoding": "json",
        "prompt_reconstructed": True,
        "retrieved": retrieved,
        "answer": answer,
        "citations": citations or _citations(answer, settings.citations_path),
    }
    if left_out:
        record["retrieved_left_out"] = left_out
    return record


class OpenInferenceAdapter:
    name = "openinference"

    def detect(self, first_line: bytes) -> bool:
        try:
            return _is_span_line(json.loads(first_line.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return False

    def convert(self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings) -> Iterator[Call | LineReject]:
        spans: list[Span] = []
        out: list[Call | LineReject] = []
        unpairable: dict[str, str] = {}
        source_bytes = 0
        for line_no, raw in lines:
            source_bytes += len(raw)
            parsed = parse_span(line_no, raw)
            if isinstance(parsed, LineReject):
                out.append(parsed)
                trace_id = _trace_of(raw) if parsed.reason == NOT_OF_FORMAT else None
                if trace_id is not None:
                    unpairable.setdefault(trace_id, f"line {line_no} of its trace is no readable span")
            else:  # every kind: CHAIN and other spans place the calls and retrievers in the tree
                spans.append(parsed)
        trace = _Trace(spans)
        trace.unpairable = unpairable
        budget = traces.RecordBudget(source_bytes)
        out.extend(_call(trace, s, settings, budget) for s in model_calls(trace, spans))
        yield from sorted(out, key=lambda item: item.line_no)


def model_calls(trace: _Trace, spans: list[Span]) -> list[Span]:
    """The LLM spans that are model calls: every LLM span but a wrapper, one with an LLM span below it in its
    trace (a framework's LLM object around the SDK call it makes, both instrumented: LlamaIndex's or LangChain's
    LLM span over the openai instrumentor's). The innermost span is the call the SDK made; the wrapper's line
    holds no call, so the call lands once. (A span exported twice is two calls: ingest reports the second.)"""
    llm = [s for s in spans if s.kind == "LLM"]
    below: set[tuple[str, str]] = set()  # spans with an LLM span somewhere under them
    for s in llm:
        node = trace.parent(s)
        while node is not None and (node.trace_id, node.span_id) not in below:  # each span marked once
            below.add((node.trace_id, node.span_id))
            node = trace.parent(node)
    return [s for s in llm if (s.trace_id, s.span_id) not in below]


ADAPTER = OpenInferenceAdapter()
