"""Record the Langfuse adapter fixtures with the real `langfuse` SDK, offline.

Run with `.venv-adapters/bin/python scripts/record_langfuse_fixtures.py` (langfuse 5.0.4, openai 3.57.0,
opentelemetry-sdk 1.45.2). A small RAG app is traced with the SDK's own API (a chain observation, a retriever
observation `as_type="retriever"` whose output is LangChain-shaped Documents) and the SDK's OpenAI integration
(`langfuse.openai`) around the real `openai` client, which calls a chat server on 127.0.0.1. The SDK exports its spans
as OTLP/protobuf to `POST /api/public/otel/v1/traces` on the same loopback server (the endpoint the 5.x SDK posts to),
which records them. From the captured spans this script writes, into tests/fixtures/adapters/langfuse/:

- `observations_page.json`: one page of `GET /api/public/v2/observations` (pretty-printed, newest first, as the API
  sorts), `observations_export.jsonl`: the same observations as the blob-storage export's `observations_v2/` JSONL
  (one per line, snake_case fields, timestamps `YYYY-MM-DD HH:MM:SS.ffffff` UTC) plus one bad line and one line of
  another shape, `observations_page_cut.json`: a page cut off mid-document (a broken download);
- `expected.json`: the planted truth (every citation's provenance reason, every reject, every answer reject).

The mapping from captured span to observation is ours (Langfuse's server does it in OtelIngestionProcessor.ts);
kept small, field by field:
  id = span id (hex), traceId = trace id (hex), parentObservationId = parent span id (hex) or null, name = span
  name, type = upper-cased `langfuse.observation.type`, startTime/endTime = the span's ns times, input/output = the
  `langfuse.observation.input`/`.output` attribute strings as the SDK wrote them (the API returns I/O as raw strings),
  metadata = the `langfuse.observation.metadata.<key>` attributes with their JSON-encoded values decoded,
  providedModelName = `langfuse.observation.model.name`, modelParameters = `langfuse.observation.model.parameters`
  decoded, promptName/promptVersion = `langfuse.observation.prompt.name`/`.version`, level = `.level` or DEFAULT.

Deterministic: ids come from a sequential `id_generator` (a Langfuse() argument), and the OpenTelemetry SDK's clock
(`opentelemetry.sdk.trace.time_ns`, the only clock behind span times) is replaced by a counter that starts at
2026-11-20T09:00:00Z and advances 250 ms per reading. Two settings a team may have, set here on purpose:
`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT=4000` (the OTel SDK cuts longer attribute values: the long-prompt call's input
arrives cut), and a `mask` function that fails on account numbers (the SDK then writes its fallback value).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "adapters" / "langfuse"
ATTRIBUTE_LIMIT = 4000
os.environ["OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"] = str(ATTRIBUTE_LIMIT)  # read when Langfuse builds its provider
START_NS = int(datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc).timestamp()) * 1_000_000_000
TICK_NS = 250_000_000
MODEL = "gpt-4.1-mini"
RESPONSE_MODEL = "gpt-4.1-mini-2025-04-14"


# -- the knowledge base the app retrieves from -----------------------------------------------------------------------

KB = {
    "kb-refunds#1": "Refunds to the original card are issued within 5 business days of approval. "
    "Refunds for orders paid with gift cards are returned as store credit.",
    "kb-refunds#2": "Approval of a refund depends on the condition of the return. Items must be unused and in their "
    "original packaging. Our warehouse inspects every return within two business days of arrival and records the "
    "result in your account. Once the inspection passes, the refund is approved automatically. If an item fails "
    "inspection, we email you photos and you may ask for the item to be shipped back at no cost within 30 days.",
    "kb-store-credit#1": "Store credit is applied immediately and never expires. It can be combined with any "
    "discount code at checkout.",
    "kb-shipping#1": "Standard shipping takes 3 to 7 business days within the country. Express shipping arrives the "
    "next business day when ordered before 2 pm.",
    "kb-shipping#4": "Orders to remote islands may take up to 14 business days.",
    "kb-warranty#2": "Electronics carry a two-year limited warranty covering manufacturing defects. Accidental "
    "damage is not covered.",
    "kb-privacy#1": "We keep order records for seven years to meet tax law. Marketing preferences can be changed at "
    "any time in your account settings.",
    "kb-privacy#3": "You can request a copy of your personal data; we send it within 30 days as a ZIP file.",
    "kb-accounts#2": "Account numbers start with ACCT- followed by eight digits and appear on every invoice.",
}
CUT = 300  # the app cuts every chunk to its first 300 characters
KEEP = 4  # and renders the top 4 of the 5 retrieved
SYSTEM = (
    "You are the help-centre assistant. Answer only from the sources below. Reply with JSON: "
    '{"answer": "...", "citations": [{"chunk_id": "...", "span": "exact words from that source", '
    '"claim": "the sentence of your answer"}]}.\n\nSources:\n'
)
POLICY = (  # the long-prompt surface sends the whole returns policy before the sources: over the attribute limit
    "Returns policy, full text (version 2026-10). "
    + " ".join(
        f"Section {i}: a returned item is checked against the order, the packaging and the serial number on file, "
        f"and the outcome is recorded in the customer's account history with the inspector's initials."
        for i in range(1, 31)
    )
    + "\n\n"
)


@dataclass(frozen=True)
class Doc:
    chunk_id: str
    id_in: str  # "id": LangChain Document.id set; "metadata": only metadata["chunk_id"] (LangChain's default)

    def langchain(self) -> dict[str, Any]:
        """The Document as the Langfuse LangChain handler serializes it (page_content, metadata, optional id)."""
        doc: dict[str, Any] = {"page_content": KB[self.chunk_id], "metadata": {"source": self.chunk_id.split("#")[0]}}
        if self.id_in == "id":
            doc["id"] = self.chunk_id
        else:
            doc["metadata"]["chunk_id"] = self.chunk_id
        doc["type"] = "Document"
        return doc


def _cite(chunk_id: str, span: str, claim: str) -> dict[str, str]:
    return {"chunk_id": chunk_id, "span": span, "claim": claim}


# -- the loopback server: OpenAI chat completions and Langfuse's OTLP endpoint ---------------------------------------


class Loopback:
    def __init__(self, answer_for: Callable[[list[dict]], str]) -> None:
        self.otlp: list[bytes] = []
        self.other_paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _reply(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                outer.other_paths.append("GET " + self.path)
                self._reply(404, b"{}", "application/json")

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path == "/api/public/otel/v1/traces":
                    assert self.headers.get("content-type") == "application/x-protobuf", self.headers
                    assert self.headers.get("content-encoding") in (None, "identity"), "compression is off"
                    outer.otlp.append(raw)
                    self._reply(200, b"", "application/x-protobuf")
                    return
                if self.path == "/v1/chat/completions":
                    request = json.loads(raw)
                    body = {
                        "id": f"chatcmpl-{len(outer.otlp)}",
                        "object": "chat.completion",
                        "created": 1795165200,
                        "model": RESPONSE_MODEL,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": answer_for(request["messages"])},
                            }
                        ],
                        "usage": {"prompt_tokens": 400, "completion_tokens": 80, "total_tokens": 480},
                    }
                    self._reply(200, json.dumps(body).encode(), "application/json")
                    return
                outer.other_paths.append("POST " + self.path)
                self._reply(404, b"{}", "application/json")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_port}"

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# -- the scenarios ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    key: str  # names the call in expected.json
    question: str
    docs: tuple[Doc, ...]
    answer: str  # what the chat server replies (the app's answer format, or plain text)
    citations: tuple[tuple[dict, str, str], ...] = ()  # (citation, expected reason, note)
    surface: str | None = "help-center"
    preamble: str = ""


def _answer(text: str, cits: tuple[tuple[dict, str, str], ...]) -> str:
    return json.dumps({"answer": text, "citations": [c for c, _, _ in cits]})


D = Doc
Q1 = (
    (
        _cite("kb-refunds#1", "issued within 5 business days of approval", "Card refunds take 5 business days."),
        "ok",
        "span whole in its chunk (ids from Document.id)",
    ),
    (
        _cite("kb-refunds#2", "inspects every return within two business days", "Returns are inspected in two days."),
        "ok",
        "span in the kept part of a chunk the app cut",
    ),
    (
        _cite("kb-refunds#2", "shipped back at no cost within 30 days", "Failed items ship back free."),
        "span_truncated",
        "span in the part of kb-refunds#2 the app cut at 300 characters",
    ),
    (
        _cite("kb-shipping#4", "up to 14 business days", "Remote islands take longer."),
        "dropped_before_prompt",
        "retrieved at rank 5, not rendered (the app keeps the top 4)",
    ),
    (
        _cite("kb-refunds#1", "Store credit is applied immediately", "Store credit is immediate."),
        "span_in_other_chunk",
        "span is kb-store-credit#1's, cited as kb-refunds#1",
    ),
)
Q2 = (
    (
        _cite("kb-store-credit#1", "never expires", "Store credit does not expire."),
        "ok",
        "ids from metadata chunk_id (no Document.id, LangChain's default)",
    ),
    (
        _cite("kb-giftcards#9", "Gift cards never expire", "Gift cards do not expire either."),
        "fabricated_id",
        "no such chunk retrieved or in the prompt",
    ),
    (
        _cite("kb-store-credit#1", "credit can be moved to another account", "Credit can be moved."),
        "span_missing",
        "the span is nowhere in the prompt",
    ),
    (
        _cite("kb-refunds#1", "I paid by card last week", "You paid by card."),
        "span_outside_context",
        "the span is only in the user's question",
    ),
    (
        _cite("kb-store-credit#1", "within 5 business days of approval", "Card refunds take 5 days."),
        "span_in_other_chunk",
        "the span is kb-refunds#1's",
    ),
)
Q3_TURN1 = (
    (
        _cite("kb-warranty#2", "two-year limited warranty", "Electronics have a two-year warranty."),
        "ok",
        "turn 1 of a two-turn trace: paired with turn 1's retriever",
    ),
)
Q3_TURN2 = (
    (
        _cite("kb-privacy#1", "seven years to meet tax law", "Orders are kept seven years."),
        "ok",
        "turn 2: its own retriever's chunks come first (ranks 1-2: nearest common ancestor)",
    ),
    (
        _cite("kb-warranty#2", "two-year limited warranty", "And a two-year warranty."),
        "dropped_before_prompt",
        "kb-warranty#2 was retrieved in turn 1 only: paired after turn 2's own chunks (rank 3), not in this prompt",
    ),
)
Q6_ANSWER = (
    (
        _cite("kb-privacy#3", "within 30 days as a ZIP file", "You get your data within 30 days."),
        "ok",
        "the answer call after a query-rewrite call: paired with the retriever that ran between them",
    ),
)

TURNS = {
    "q1": Turn(
        "q1",
        "How long do card refunds take?",
        (
            D("kb-refunds#1", "id"),
            D("kb-refunds#2", "id"),
            D("kb-store-credit#1", "id"),
            D("kb-shipping#1", "id"),
            D("kb-shipping#4", "id"),
        ),
        _answer("Card refunds take 5 business days after approval.", Q1),
        Q1,
    ),
    "q2": Turn(
        "q2",
        "Does store credit expire? I paid by card last week.",
        (
            D("kb-store-credit#1", "metadata"),
            D("kb-refunds#1", "metadata"),
            D("kb-warranty#2", "metadata"),
            D("kb-shipping#1", "metadata"),
            D("kb-refunds#2", "metadata"),
        ),
        _answer("Store credit never expires.", Q2),
        Q2,
    ),
    "q3a": Turn(
        "q3a",
        "Is my laptop under warranty?",
        (D("kb-warranty#2", "id"), D("kb-shipping#1", "id")),
        _answer("Electronics have a two-year warranty.", Q3_TURN1),
        Q3_TURN1,
    ),
    "q3b": Turn(
        "q3b",
        "And how long do you keep my orders?",
        (D("kb-privacy#1", "id"), D("kb-privacy#3", "id")),
        _answer("Seven years.", Q3_TURN2),
        Q3_TURN2,
    ),
    "q4": Turn(
        "q4",
        "Where do I find ACCT-00418822 on my invoice?",
        (D("kb-accounts#2", "id"),),
        _answer("On every invoice.", ((_cite("kb-accounts#2", "appear on every invoice", "x"), "", ""),)),
    ),
    "q5": Turn(
        "q5",
        "Why was my return rejected?",
        (D("kb-refunds#2", "id"), D("kb-refunds#1", "id")),
        _answer("It failed inspection.", ((_cite("kb-refunds#2", "fails inspection", "x"), "", ""),)),
        preamble=POLICY,
    ),
    "q6": Turn(
        "q6",
        "data copy how long",
        (D("kb-privacy#3", "id"), D("kb-privacy#1", "id")),
        _answer("Within 30 days.", Q6_ANSWER),
        Q6_ANSWER,
    ),
    "q7": Turn(
        "q7",
        "Can I combine store credit with a discount code?",
        (D("kb-store-credit#1", "id"),),
        "Yes, store credit can be combined with any discount code at checkout.",
        surface=None,
    ),
}
REWRITE_ANSWER = "How long does it take to receive a copy of my personal data?"


# -- the app, traced -------------------------------------------------------------------------------------------------


def run_app(base: str) -> None:
    from langfuse import Langfuse
    from langfuse.openai import OpenAI  # the SDK's OpenAI integration: wraps the real openai client
    from opentelemetry.sdk import trace as otel_sdk_trace
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    ticks = iter(range(10**9))
    otel_sdk_trace.time_ns = lambda: START_NS + next(ticks) * TICK_NS  # the pinned clock

    class SequentialIds(IdGenerator):
        def __init__(self) -> None:
            self.spans = 0
            self.traces = 0

        def generate_span_id(self) -> int:
            self.spans += 1
            return 0x1F5E000000000000 + self.spans

        def generate_trace_id(self) -> int:
            self.traces += 1
            return 0x7A11_0000_0000_0000_0000_0000_0000_0000 + self.traces

    def mask(*, data: Any, **kwargs: Any) -> Any:  # the team's PII mask: it cannot handle account numbers
        if "ACCT-" in json.dumps(data, default=str):
            raise ValueError("unexpected account number")
        return data

    langfuse = Langfuse(
        public_key="pk-lf-fixtures",
        secret_key="sk-lf-fixtures",
        base_url=base,
        id_generator=SequentialIds(),
        mask=mask,
        otel_compression="none",
        flush_at=1000,
        flush_interval=3600,
    )
    client = OpenAI(api_key="sk-local", base_url=base + "/v1", max_retries=0)
    create: Any = client.chat.completions.create  # langfuse.openai adds name=/metadata= that openai's types lack

    def messages(turn: Turn) -> list[dict]:
        sources = "\n\n".join(f"[{d.chunk_id}] {KB[d.chunk_id][:CUT]}" for d in turn.docs[:KEEP])
        return [
            {"role": "system", "content": SYSTEM.replace("Sources:\n", turn.preamble + "Sources:\n") + sources},
            {"role": "user", "content": turn.question},
        ]

    def retrieve(turn: Turn) -> None:
        with langfuse.start_as_current_observation(name="kb-search", as_type="retriever", input=turn.question) as r:
            r.update(output=[d.langchain() for d in turn.docs])

    def generate(turn: Turn) -> None:
        extra: dict[str, Any] = {"metadata": {"surface": turn.surface}} if turn.surface else {}
        create(model=MODEL, messages=messages(turn), name="answer", **extra)

    def rag(turn: Turn) -> None:
        with langfuse.start_as_current_observation(name="rag-answer", as_type="chain", input=turn.question) as chain:
            retrieve(turn)
            generate(turn)
            chain.update(output="done")

    for key in ("q1", "q2"):
        rag(TURNS[key])
    with langfuse.start_as_current_observation(name="conversation", as_type="span", input="two turns"):
        rag(TURNS["q3a"])
        rag(TURNS["q3b"])
    for key in ("q4", "q5"):
        rag(TURNS[key])
    turn = TURNS["q6"]
    with langfuse.start_as_current_observation(name="rag-with-rewrite", as_type="chain", input=turn.question):
        create(
            model=MODEL,
            messages=[{"role": "user", "content": "Rewrite as a full question: " + turn.question}],
            name="rewrite-query",
            metadata={"surface": "help-center"},
        )
        retrieve(turn)
        generate(turn)
    rag(TURNS["q7"])
    langfuse.flush()
    langfuse.shutdown()


def answer_for(msgs: list[dict]) -> str:
    user = msgs[-1]["content"]
    if user.startswith("Rewrite as a full question: "):
        return REWRITE_ANSWER
    return next(t.answer for t in TURNS.values() if t.question == user)


# -- captured OTLP → observations ------------------------------------------------------------------------------------


def _attr_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_attr_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _attr_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _json_or_raw(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def observations(bodies: list[bytes]) -> list[dict]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out = []
    for raw in bodies:
        request = ExportTraceServiceRequest.FromString(raw)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    attrs = {kv.key: _attr_value(kv.value) for kv in span.attributes}
                    meta_prefix = "langfuse.observation.metadata."
                    obs: dict[str, Any] = {
                        "id": span.span_id.hex(),
                        "traceId": span.trace_id.hex(),
                        "parentObservationId": span.parent_span_id.hex() or None,
                        "type": str(attrs.get("langfuse.observation.type", "span")).upper(),
                        "name": span.name,
                        "startTime": span.start_time_unix_nano,
                        "endTime": span.end_time_unix_nano,
                        "level": attrs.get("langfuse.observation.level", "DEFAULT"),
                        "input": attrs.get("langfuse.observation.input"),
                        "output": attrs.get("langfuse.observation.output"),
                        "metadata": {
                            k[len(meta_prefix) :]: _json_or_raw(v)
                            for k, v in attrs.items()
                            if k.startswith(meta_prefix)
                        },
                        "providedModelName": attrs.get("langfuse.observation.model.name"),
                        "modelParameters": _json_or_raw(attrs.get("langfuse.observation.model.parameters")),
                        "promptName": attrs.get("langfuse.observation.prompt.name"),
                        "promptVersion": attrs.get("langfuse.observation.prompt.version"),
                    }
                    out.append(obs)
    return sorted(out, key=lambda o: (o["startTime"], o["id"]))


def _iso(ns: int) -> str:  # the API's timestamps: ISO 8601, milliseconds, Z
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _export_ts(ns: int) -> str:  # the blob export's: YYYY-MM-DD HH:MM:SS.ffffff in UTC, no offset
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def api_page(obs: list[dict]) -> dict:
    data = []
    for o in sorted(obs, key=lambda o: (o["startTime"], o["id"]), reverse=True):  # the API: newest first
        data.append({**o, "startTime": _iso(o["startTime"]), "endTime": _iso(o["endTime"]), "projectId": "fixtures"})
    return {"data": data, "meta": {"cursor": None}}


def export_rows(obs: list[dict]) -> list[dict]:
    rows = []
    for o in obs:
        rows.append(
            {
                "id": o["id"],
                "trace_id": o["traceId"],
                "project_id": "fixtures",
                "environment": "default",
                "type": o["type"],
                "parent_observation_id": o["parentObservationId"] or "",  # the export: empty string for a root
                "start_time": _export_ts(o["startTime"]),
                "end_time": _export_ts(o["endTime"]),
                "name": o["name"],
                "metadata": o["metadata"],
                "level": o["level"],
                "input": o["input"] or "",  # the export: empty string when not set
                "output": o["output"] or "",
                "provided_model_name": o["providedModelName"] or "",
                "model_parameters": json.dumps(o["modelParameters"]) if o["modelParameters"] else "",
                "prompt_name": o["promptName"] or "",
                "prompt_version": o["promptVersion"],
            }
        )
    return rows


# -- truth -----------------------------------------------------------------------------------------------------------


def expected(obs: list[dict]) -> dict:
    gens = [o["id"] for o in obs if o["type"] == "GENERATION"]  # in start order: the order run_app calls them
    order = ["q1", "q2", "q3a", "q3b", "q4", "q5", "rewrite", "q6", "q7"]
    assert len(gens) == len(order), gens
    calls = dict(zip(order, gens, strict=True))
    by_question = {k: v for k, v in calls.items() if k != "rewrite"}
    rewrite_id = calls["rewrite"]
    citations = []
    for key, turn in TURNS.items():
        for pos, (cit, reason, note) in enumerate(turn.citations):
            citations.append(
                {
                    "call": key,
                    "request_id": by_question[key],
                    "position": pos,
                    "chunk_id": cit["chunk_id"],
                    "expected_reason": reason,
                    "note": note,
                }
            )
    return {
        "calls": {**by_question, "rewrite": rewrite_id},
        "citations": citations,
        "rejects": [
            {
                "call": "q4",
                "request_id": by_question["q4"],
                "reason": "content_redacted",
                "note": "the team's mask function raised: the SDK wrote its fallback value as the input",
            },
            {
                "call": "q5",
                "request_id": by_question["q5"],
                "reason": "content_truncated",
                "note": f"input over OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT={ATTRIBUTE_LIMIT}: the OTel SDK cut it",
            },
            {
                "call": "rewrite",
                "request_id": rewrite_id,
                "reason": "retrieval_not_paired",
                "note": "a query-rewrite call that ran before any retriever of its trace",
            },
        ],
        "answer_rejects": [
            {
                "call": "q7",
                "request_id": by_question["q7"],
                "reason": "citations_not_json",
                "note": "the model answered in plain text; no surface metadata (default surface)",
            }
        ],
    }


# -- a LangChain vector store under Langfuse's LangChain handler ----------------------------------------------------

VS_QUESTION = "How long do card refunds take, and does store credit expire?"
VS_KEEP = 3  # the app renders the top 3 of the 4 the store returns


def run_vectorstore(base: str) -> tuple[list[str], list[tuple[dict, str, str]]]:
    """LangChain's InMemoryVectorStore (its documents get the store's own UUID as `id`; the chunk id is in
    metadata) as a retriever traced by Langfuse's LangChain CallbackHandler, then the answer call through the
    SDK's OpenAI integration, in one chain. Returns the retrieved chunk ids in rank order and the planted
    citations (chosen from that order, before the chat server answers)."""
    import uuid

    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore
    from langfuse import Langfuse
    from langfuse.langchain import CallbackHandler
    from langfuse.openai import OpenAI
    from opentelemetry.sdk import trace as otel_sdk_trace
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    ticks = iter(range(10**9))
    otel_sdk_trace.time_ns = lambda: START_NS + next(ticks) * TICK_NS

    class SequentialIds(IdGenerator):
        def __init__(self) -> None:
            self.spans = 0
            self.traces = 0

        def generate_span_id(self) -> int:
            self.spans += 1
            return 0x2F5E000000000000 + self.spans

        def generate_trace_id(self) -> int:
            self.traces += 1
            return 0x7B22_0000_0000_0000_0000_0000_0000_0000 + self.traces

    langfuse = Langfuse(
        public_key="pk-lf-fixtures",
        secret_key="sk-lf-fixtures",
        base_url=base,
        id_generator=SequentialIds(),
        otel_compression="none",
        flush_at=1000,
        flush_interval=3600,
    )
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
    ids = ["kb-refunds#1", "kb-store-credit#1", "kb-shipping#1", "kb-warranty#2", "kb-privacy#1"]
    store.add_documents(
        [Document(page_content=KB[cid], metadata={"chunk_id": cid, "source": cid.split("#")[0]}) for cid in ids],
        ids=[str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://kb.example/{cid}")) for cid in ids],  # the store's UUIDs
    )
    retriever = store.as_retriever(search_kwargs={"k": 4})
    client = OpenAI(api_key="sk-local", base_url=base + "/v1", max_retries=0)
    create: Any = client.chat.completions.create
    planted: list[tuple[dict, str, str]] = []
    order: list[str] = []
    with langfuse.start_as_current_observation(name="rag-answer", as_type="chain", input=VS_QUESTION):
        docs = retriever.invoke(VS_QUESTION, config={"callbacks": [CallbackHandler()]})
        order = [d.metadata["chunk_id"] for d in docs]
        assert all(d.id and d.id != d.metadata["chunk_id"] for d in docs)  # the store's UUID, not the chunk id
        first, second, unrendered = order[0], order[1], order[VS_KEEP]
        planted += [
            (_cite(first, KB[first][:40], "The first source says so."), "ok", "chunk id from metadata, not the UUID"),
            (_cite(second, KB[second][-30:].strip(), "The second source says so."), "ok", "rank 2, metadata chunk id"),
            (
                _cite(unrendered, KB[unrendered][:30], "An unrendered source says so."),
                "dropped_before_prompt",
                f"rank {VS_KEEP + 1}: retrieved, not rendered (the app keeps the top {VS_KEEP})",
            ),
            (_cite("kb-missing#7", "refunds are instant", "Refunds are instant."), "fabricated_id", "never retrieved"),
            (
                _cite(first, KB[second][:30], "The first source says the second's words."),
                "span_in_other_chunk",
                "the span is the rank-2 chunk's, cited as rank 1",
            ),
        ]
        sources = "\n\n".join(f"[{d.metadata['chunk_id']}] {d.page_content}" for d in docs[:VS_KEEP])
        VS_ANSWER.append(json.dumps({"answer": "See the sources.", "citations": [c for c, _, _ in planted]}))
        create(
            model=MODEL,
            messages=[
                {"role": "system", "content": SYSTEM + sources},
                {"role": "user", "content": VS_QUESTION},
            ],
            name="answer",
            metadata={"surface": "help-center"},
        )
    langfuse.flush()
    langfuse.shutdown()
    return order, planted


VS_ANSWER: list[str] = []


def main_vectorstore() -> int:
    server = Loopback(lambda msgs: VS_ANSWER[-1])
    try:
        order, planted = run_vectorstore(server.base)
    finally:
        server.shutdown()
    obs = observations(server.otlp)
    rows = export_rows(obs)
    (OUT / "observations_vectorstore.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    [gen] = [o["id"] for o in obs if o["type"] == "GENERATION"]
    truth = {
        "request_id": gen,
        "retrieved": order,
        "citations": [
            {"position": i, "chunk_id": c["chunk_id"], "expected_reason": reason, "note": note}
            for i, (c, reason, note) in enumerate(planted)
        ],
    }
    (OUT / "expected_vectorstore.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    print(f"{len(obs)} observations (InMemoryVectorStore under the LangChain handler) -> {OUT}")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--vectorstore"]:
        return main_vectorstore()
    import subprocess

    subprocess.run([sys.executable, __file__, "--vectorstore"], check=True)  # a Langfuse client of its own
    server = Loopback(answer_for)
    try:
        run_app(server.base)
    finally:
        server.shutdown()
    if server.other_paths:
        print("unexpected requests:", server.other_paths, file=sys.stderr)
    obs = observations(server.otlp)
    OUT.mkdir(parents=True, exist_ok=True)
    page = api_page(obs)
    text = json.dumps(page, indent=2, ensure_ascii=False) + "\n"
    (OUT / "observations_page.json").write_text(text, encoding="utf-8")
    (OUT / "observations_page_cut.json").write_text(text[:1500] + "\n", encoding="utf-8")
    lines = [json.dumps(r, ensure_ascii=False) for r in export_rows(obs)]
    lines.insert(3, '{"id": "1f5e0000000000ff", "trace_id": "7a11')  # a line cut by a broken copy
    lines.insert(7, json.dumps({"name": "export-manifest", "rows": len(obs)}))  # a JSON line of another shape
    (OUT / "observations_export.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    truth = expected(obs)
    truth["line_rejects"] = [
        {"file": "observations_export.jsonl", "line_no": 4, "reason": "invalid_json", "note": "a line cut short"},
        {"file": "observations_export.jsonl", "line_no": 8, "reason": "not_of_format", "note": "another JSON shape"},
        {"file": "observations_page_cut.json", "line_no": 1, "reason": "invalid_json", "note": "a page cut short"},
    ]
    (OUT / "expected.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    print(f"{len(obs)} observations from {len(server.otlp)} OTLP requests -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
