"""Record the OTLP fixtures (tests/fixtures/adapters/otlp/) with the real OpenTelemetry code.

Run with the adapters venv: `.venv-adapters/bin/python scripts/record_otlp_fixtures.py`. Everything stays on
127.0.0.1: the real `openai` client calls a local chat-completions server; the OpenTelemetry SDK exports through
its OTLP/HTTP exporters (protobuf) to a local capture server; this script decodes the protobuf
(opentelemetry-proto) and writes what the collector's file exporter writes (`format: json`): one
ExportTraceServiceRequest (or, for the log pipeline, ExportLogsServiceRequest) per line, in OTLP/JSON (hex ids,
lowerCamelCase keys, integer enums, int64 as decimal strings).

What makes which span:
- chat spans: opentelemetry-instrumentation-openai-v2 (`OpenAIInstrumentor`), one process per mode because the
  instrumentation reads the semconv opt-in once per process. `otlp_attributes.jsonl`: the current conventions
  (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental plus OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
  =span_only: gen_ai.input.messages / gen_ai.output.messages on the span; one call with event_only: the same
  content on a gen_ai.client.inference.operation.details log record). `otlp_events.jsonl`: the older
  per-message events (no opt-in, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: gen_ai.*.message and
  gen_ai.choice log records on the span, exported to /v1/logs). openai-v2 2.4b0 needs
  opentelemetry-util-genai 0.4b0: it imports `opentelemetry.util.genai.instruments`, which 1.2b0 removed (the
  1.3b0 first installed cannot import it), and from 1.0b0 `is_experimental_mode()` always returns True, so the
  older event mode would be unreachable.
- retrieval and workflow spans: created here with the OpenTelemetry API, following the GenAI retrieval
  convention (v1.40: `retrieval {gen_ai.data_source.id}`, kind CLIENT, gen_ai.operation.name=retrieval,
  gen_ai.retrieval.query.text, gen_ai.retrieval.documents as a JSON string). No installed library emits them
  (util-genai 0.4b0 has no retrieval invocation; LlamaIndex and LangChain have no OTel GenAI instrumentation
  here). Documents with text add `content`; documents without text are {id, score}, all the convention requires.
- the span-level `surface` attribute: a span processor copying the `surface` baggage entry onto spans (the
  pattern of opentelemetry-processor-baggage; written here, a few lines).
- truncation: the SDK's own attribute length limit (SpanLimits(max_span_attribute_length=...), i.e.
  OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT) cuts gen_ai.input.messages.
- redaction: the collector's redaction processor is Go and not run here. Its documented effect
  (processor/redactionprocessor/README.md: a blocked value is masked with asterisks; `summary: debug` adds
  redaction.masked.keys / redaction.masked.count) is applied to that one span after decoding. Not the real
  processor: said here and in the expected file's note.

Deterministic: trace/span ids come from a counter IdGenerator, and the SDK's clock (`time_ns` in the trace and
logs modules) is replaced by a counter that starts at 2026-11-16T09:00:00Z and advances 1 ms per reading, so
the files reproduce byte for byte and every end is after its start.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import openai
from google.protobuf.json_format import MessageToDict
from opentelemetry import baggage, context
from opentelemetry._logs import _internal as logs_api
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk import trace as sdk_trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs import _internal as sdk_logs
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "adapters" / "otlp"
MODEL = "gpt-4.1"
RESPONSE_MODEL = "gpt-4.1-2025-04-14"
CLOCK_START = 1_794_819_600_000_000_000  # 2026-11-16T09:00:00Z
CARD = "4111111111111111"

# --- the knowledge base and the app's assembly -------------------------------------------------------------------

CHUNKS = {
    "kb-112#3": "Refunds to the original card are issued within 5 business days of approval. "
    "Bank processing can add up to 3 further days before the money shows on a statement.",
    "kb-087#1": "Store credit is applied immediately and never expires.",
    "kb-204#2": "Exchanges are free within 30 days of delivery. After 30 days an exchange costs a flat "
    "restocking fee of 12 EUR, and items marked final sale cannot be exchanged at all.",
    "kb-310#1": "Gift cards cannot be refunded or exchanged for cash.",
    "kb-415#4": "Orders over 50 EUR ship free within the EU; smaller orders pay 4.90 EUR.",
    "kb-520#2": "Damaged items are replaced at no cost if reported within 14 days.",
    "kb-633#1": "Customer support answers chat messages from 8:00 to 20:00 CET on weekdays.",
}
CUT_CHARS = 110  # the app cuts every chunk to its first 110 characters (only kb-204#2 is longer)
TOP_K = 3  # the app renders the first 3 chunks it was given


def system_prompt(chunk_ids: list[str]) -> str:
    sources = "\n\n".join(f"[{cid}] {CHUNKS[cid][:CUT_CHARS]}" for cid in chunk_ids[:TOP_K])
    return (
        "You are the help-centre assistant. Answer only from the sources. Reply with JSON: "
        '{"answer": str, "citations": [{"chunk_id", "span", "claim"}]}.\n\nSources:\n\n' + sources
    )


def cite(chunk_id: str, span: str, claim: str) -> dict:
    return {"chunk_id": chunk_id, "span": span, "claim": claim}


# --- local servers ----------------------------------------------------------------------------------------------


class Servers:
    """The chat-completions server (answers by the question) and the OTLP/HTTP capture server."""

    def __init__(self) -> None:
        self.answers: dict[str, str] = {}
        self.requests = 0
        self.otlp: list[tuple[str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path in ("/v1/traces", "/v1/logs"):
                    outer.otlp.append((self.path, raw))
                    self._send(b"", "application/x-protobuf")  # an empty Export*ServiceResponse
                    return
                body = json.loads(raw)
                question = body["messages"][-1]["content"]
                outer.requests += 1
                reply = {
                    "id": f"chatcmpl-fx{outer.requests:03d}",
                    "object": "chat.completion",
                    "created": 1794819600,
                    "model": RESPONSE_MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": outer.answers[question]},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 250, "completion_tokens": 80, "total_tokens": 330},
                }
                self._send(json.dumps(reply).encode(), "application/json")

            def _send(self, data: bytes, content_type: str) -> None:
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_port}"

    def shutdown(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# --- determinism ------------------------------------------------------------------------------------------------


class CounterIds(IdGenerator):
    def __init__(self, seed: int) -> None:
        self.trace = seed << 64
        self.span = seed << 32

    def generate_trace_id(self) -> int:
        self.trace += 1
        return (0x0C17E6A7E << 96) | self.trace

    def generate_span_id(self) -> int:
        self.span += 1
        return (0x5A << 56) | self.span


class Clock:
    def __init__(self) -> None:
        self.now = CLOCK_START

    def __call__(self) -> int:
        self.now += 1_000_000
        return self.now


CLOCK = Clock()
for module in (sdk_trace, sdk_logs, logs_api):
    module.time_ns = CLOCK  # type: ignore[attr-defined]


class BaggageSurface(SpanProcessor):
    """Copies the `surface` baggage entry onto every span started under it (opentelemetry-processor-baggage)."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        value = baggage.get_baggage("surface", parent_context)
        if isinstance(value, str):
            span.set_attribute("surface", value)


# --- one telemetry pipeline per phase ---------------------------------------------------------------------------


class Pipeline:
    def __init__(self, servers: Servers, seed: int, resource: dict, span_limits: SpanLimits | None = None):
        # create() adds telemetry.sdk.*, a random service.instance.id (pinned here) and, when none is given,
        # service.name unknown_service:<process>
        res = Resource.create({"service.instance.id": f"fx-instance-{seed}", **resource})
        self.tp = TracerProvider(resource=res, id_generator=CounterIds(seed), span_limits=span_limits)
        self.tp.add_span_processor(BaggageSurface())
        self.tp.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=servers.base + "/v1/traces"), schedule_delay_millis=3_600_000)
        )
        self.lp = LoggerProvider(resource=res)
        self.lp.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=servers.base + "/v1/logs"), schedule_delay_millis=3_600_000
            )
        )
        self.tracer = self.tp.get_tracer("help_center.rag", "1.0.0")

    def flush(self) -> None:
        assert self.tp.force_flush() and self.lp.force_flush()

    def shutdown(self) -> None:
        self.flush()
        self.tp.shutdown()
        self.lp.shutdown()


@contextmanager
def instrumented(pipeline: Pipeline, capture: str | None) -> Iterator[None]:
    """OpenAIInstrumentor with the content capture env variable set to `capture` (None: unset)."""
    if capture is None:
        os.environ.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    else:
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
    inst = OpenAIInstrumentor()
    inst.instrument(tracer_provider=pipeline.tp, logger_provider=pipeline.lp)
    try:
        yield
    finally:
        inst.uninstrument()


# --- the app ----------------------------------------------------------------------------------------------------


def docs(ids: list[str], with_text: bool) -> str:
    scores = [0.91, 0.84, 0.77, 0.69, 0.61]
    if with_text:
        return json.dumps([{"id": cid, "score": scores[i], "content": CHUNKS[cid]} for i, cid in enumerate(ids)])
    return json.dumps([{"id": cid, "score": scores[i]} for i, cid in enumerate(ids)])


def retrieval_attributes(query: str, source: str) -> dict:
    return {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.data_source.id": source,
        "gen_ai.provider.name": "qdrant",
        "gen_ai.retrieval.query.text": query,
    }


def retrieve(p: Pipeline, query: str, ids: list[str], with_text: bool = True) -> None:
    with p.tracer.start_as_current_span(
        "retrieval help-kb", kind=SpanKind.CLIENT, attributes=retrieval_attributes(query, "help-kb")
    ) as span:
        span.set_attribute("gen_ai.retrieval.top_k", len(ids))
        span.set_attribute("gen_ai.retrieval.documents", docs(ids, with_text))


ROOT_ATTRIBUTES: dict[str, str] = {}  # set on each request's root span (the split phases: app.surface)


@contextmanager
def workflow(p: Pipeline, name: str) -> Iterator[None]:
    attributes = ROOT_ATTRIBUTES if name == "answer_question" else None
    with p.tracer.start_as_current_span(name, kind=SpanKind.INTERNAL, attributes=attributes):
        yield


def ask(client: openai.OpenAI, servers: Servers, rendered: list[str], question: str, answer: Any) -> None:
    servers.answers[question] = answer if isinstance(answer, str) else json.dumps(answer)
    check_planted(CALLS[-1], rendered, question)
    client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "system", "content": system_prompt(rendered)}, {"role": "user", "content": question}],
        temperature=0,
    )


EXPECTED: list[dict] = []
CALLS: list[dict] = []  # (file, question) → what the call must become; request ids filled in after decoding


def plant(file: str, question: str, citations: list[tuple[dict, str, str]] | None = None, **call: Any) -> Any:
    call.setdefault("retrieved_all", call.get("retrieved", []))
    CALLS.append({"file": file, "question": question, "citations": citations or [], **call})
    return {"answer": "see citations", "citations": [c for c, _, _ in citations or []]}


def check_planted(call: dict, rendered: list[str], question: str) -> None:
    """Each planted reason holds for what this call really renders (fails loudly if the scenario drifts)."""
    shown = {cid: CHUNKS[cid][:CUT_CHARS] for cid in rendered[:TOP_K]}
    everything = system_prompt(rendered) + "\n" + question
    for c, reason, _ in call["citations"]:
        cid, span = c["chunk_id"], c["span"]
        holds = {
            "ok": cid in CHUNKS and span in CHUNKS[cid] and cid in shown and span in shown[cid],
            "span_truncated": cid in shown and span in CHUNKS[cid] and span not in shown[cid],
            "dropped_before_prompt": cid in call["retrieved_all"] and cid not in shown,
            "fabricated_id": cid not in call["retrieved"] and cid not in shown,
            "span_outside_context": span in question and not any(span in t for t in shown.values()),
            "span_in_other_chunk": cid in shown and span not in shown[cid] and any(span in t for t in shown.values()),
            "span_missing": cid in shown and span not in everything,
        }[reason]
        assert holds, (reason, c)


def q1(p: Pipeline, client: openai.OpenAI, servers: Servers, file: str, tag: str) -> None:
    """Every provenance reason in one call: 4 retrieved, 3 rendered (kb-204#2 cut), one citation per reason."""
    question = f"How long do card refunds take, and is an exchange possible after 40 days? ({tag})"
    ids = ["kb-112#3", "kb-087#1", "kb-204#2", "kb-310#1"]
    answer = plant(
        file,
        question,
        [
            (
                cite("kb-112#3", "issued within 5 business days of approval", "Card refunds take 5 business days."),
                "ok",
                "span inside the cited chunk",
            ),
            (
                cite("kb-204#2", "items marked final sale cannot be exchanged", "Sale items cannot be exchanged."),
                "span_truncated",
                "kb-204#2 was cut to 110 characters; the span is in the cut part",
            ),
            (
                cite("kb-310#1", "Gift cards cannot be refunded", "Gift cards are not refundable."),
                "dropped_before_prompt",
                "rank 4 was retrieved but not rendered (top 3)",
            ),
            (
                cite("kb-999#9", "refunds are instant", "Refunds are instant."),
                "fabricated_id",
                "chunk id neither retrieved nor in the prompt",
            ),
            (
                cite("kb-112#3", "is an exchange possible after 40 days", "The customer asks about 40 days."),
                "span_outside_context",
                "quotes the user's question",
            ),
            (
                cite("kb-112#3", "Store credit is applied immediately", "Store credit is immediate."),
                "span_in_other_chunk",
                "the span is kb-087#1's text, cited as kb-112#3",
            ),
            (
                cite("kb-087#1", "store credit can be converted to cash", "Credit converts to cash."),
                "span_missing",
                "the span is nowhere in the prompt",
            ),
        ],
        retrieved=ids,
    )
    with workflow(p, "answer_question"):
        retrieve(p, question, ids)
        ask(client, servers, ids, question, answer)
    p.flush()


def q2(p: Pipeline, client: openai.OpenAI, servers: Servers, file: str) -> None:
    """Pairing: the inner retriever (sibling of the call) ranks before the outer one (under the grandparent);
    a retriever still running when the call started is not paired; a chunk both retrievers return keeps its
    first rank."""
    question = "Do damaged items get replaced, and is shipping free?"
    outer_ids = ["kb-415#4", "kb-520#2"]
    inner_ids = ["kb-520#2", "kb-633#1"]
    late_ids = ["kb-087#1"]
    rendered = ["kb-520#2", "kb-633#1", "kb-415#4"]
    answer = plant(
        file,
        question,
        [
            (
                cite("kb-520#2", "replaced at no cost if reported within 14 days", "Damaged items are replaced."),
                "ok",
                "inner retriever, rank 1",
            ),
            (
                cite("kb-415#4", "Orders over 50 EUR ship free within the EU", "Shipping is free over 50 EUR."),
                "ok",
                "outer retriever (under the grandparent), rank 3",
            ),
            (
                cite("kb-087#1", "Store credit is applied immediately", "Credit is immediate."),
                "fabricated_id",
                "kb-087#1 only comes from a retriever that ended after the call started: not paired",
            ),
        ],
        retrieved=["kb-520#2", "kb-633#1", "kb-415#4"],
    )
    with workflow(p, "answer_question"):
        retrieve(p, question, outer_ids)
        with workflow(p, "rerank_and_answer"):
            retrieve(p, question, inner_ids)
            late = p.tracer.start_span(  # started now, not made current: it runs beside the call
                "retrieval help-kb-slow",
                kind=SpanKind.CLIENT,
                attributes=retrieval_attributes(question, "help-kb-slow"),
            )
            ask(client, servers, rendered, question, answer)
            late.set_attribute("gen_ai.retrieval.documents", docs(late_ids, True))
            late.end()
    p.flush()


def q3(p: Pipeline, client: openai.OpenAI, servers: Servers, file: str) -> None:
    """Documents with id and score only (the convention's minimum): text is taken from the prompt by id; the
    chunk the app did not render has no text anywhere and is left out."""
    question = "When can I chat with support?"
    ids = ["kb-633#1", "kb-087#1", "kb-112#3", "kb-415#4"]
    answer = plant(
        file,
        question,
        [
            (
                cite("kb-633#1", "from 8:00 to 20:00 CET on weekdays", "Support chats on weekdays."),
                "ok",
                "text taken from the prompt",
            ),
            (
                cite("kb-633#1", "Store credit is applied immediately", "Credit is immediate."),
                "span_in_other_chunk",
                "span in kb-087#1's section",
            ),
            (
                cite("kb-415#4", "Orders over 50 EUR ship free", "Free shipping over 50 EUR."),
                "dropped_before_prompt",
                "retrieved (rank 4, id only) but not rendered: no text anywhere, so left out of retrieved and listed "
                "in retrieved_left_out, which the gate counts as retrieved",
            ),
        ],
        retrieved=["kb-633#1", "kb-087#1", "kb-112#3"],
        retrieved_all=ids,
        text_from_prompt=["kb-633#1", "kb-087#1", "kb-112#3"],
        left_out=["kb-415#4"],
    )
    with workflow(p, "answer_question"):
        retrieve(p, question, ids, with_text=False)
        ask(client, servers, ids, question, answer)
    p.flush()


def q_simple(
    p: Pipeline, client: openai.OpenAI, servers: Servers, file: str, question: str, answer: Any, **call: Any
) -> None:
    ids = ["kb-112#3", "kb-087#1"]
    if not isinstance(answer, str):
        answer = plant(file, question, answer, retrieved=ids, **call)
    else:
        plant(file, question, [], retrieved=ids, **call)
    with workflow(p, "answer_question"):
        retrieve(p, question, ids)
        ask(client, servers, ids, question, answer)
    p.flush()


# --- decoding: protobuf → the collector file exporter's JSON ------------------------------------------------------


def _hex(obj: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        if key in obj:
            obj[key] = base64.b64decode(obj[key]).hex()


def to_file_json(path: str, raw: bytes) -> dict:
    msg = ExportTraceServiceRequest() if path == "/v1/traces" else ExportLogsServiceRequest()
    msg.ParseFromString(raw)
    d = MessageToDict(msg, use_integers_for_enums=True)  # lowerCamelCase, int64 as strings; bytes come as base64
    for rs in d.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                _hex(sp, ("traceId", "spanId", "parentSpanId"))
                for link in sp.get("links", []):
                    _hex(link, ("traceId", "spanId"))
    for rl in d.get("resourceLogs", []):
        for sl in rl.get("scopeLogs", []):
            for lr in sl.get("logRecords", []):
                _hex(lr, ("traceId", "spanId"))
    return d


def spans_of(line: dict) -> Iterator[dict]:
    for rs in line.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            yield from ss.get("spans", [])


def attr(span: dict, key: str) -> Any:
    for kv in span.get("attributes", []):
        if kv["key"] == key:
            return next(iter(kv["value"].values()))
    return None


def redact(line: dict, question: str) -> None:
    """What the collector's redaction processor (blocked_values: a card-number regex; summary: debug) does to
    the chat span whose input holds `question`: the matching part is masked with asterisks and the summary
    attributes name the key."""
    for sp in spans_of(line):
        value = attr(sp, "gen_ai.input.messages")
        if isinstance(value, str) and question in value:
            for kv in sp["attributes"]:
                if kv["key"] == "gen_ai.input.messages":
                    kv["value"]["stringValue"] = value.replace(CARD, "****")
            sp["attributes"] += [
                {"key": "redaction.masked.keys", "value": {"stringValue": "gen_ai.input.messages"}},
                {"key": "redaction.masked.count", "value": {"intValue": "1"}},
            ]
            return
    raise AssertionError("no span to redact")


# --- main -------------------------------------------------------------------------------------------------------


def record_attributes(servers: Servers) -> list[dict]:
    file = "otlp_attributes.jsonl"
    client = openai.OpenAI(base_url=servers.base + "/v1", api_key="sk-local", max_retries=0)
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    p = Pipeline(servers, 1, {"service.name": "help-center"})
    with instrumented(p, "span_only"):
        q1(p, client, servers, file, "current conventions")
        q2(p, client, servers, file)
        q3(p, client, servers, file)
        token = context.attach(baggage.set_baggage("surface", "help-center-mobile"))
        q_simple(
            p,
            client,
            servers,
            file,
            "Can I pay with store credit?",
            [
                (
                    cite("kb-087#1", "Store credit is applied immediately", "Credit is immediate."),
                    "ok",
                    "surface from the span attribute (baggage processor)",
                )
            ],
            surface="help-center-mobile",
        )
        context.detach(token)
        q_simple(
            p,
            client,
            servers,
            file,
            "Is my refund late?",
            "Your refund should arrive soon [kb-112#3].",
            note="answer is not JSON: citations hold the raw text (answer_rejects downstream)",
        )
        q_simple(
            p,
            client,
            servers,
            file,
            f"My card {CARD} was charged twice, refund?",
            [(cite("kb-112#3", "issued within 5 business days", "Refunds take 5 days."), "ok", "")],
            reason="content_redacted",
            note="the collector's redaction processor masked the card number "
            "(its documented effect applied by the script, see its docstring)",
        )
    with instrumented(p, "event_only"):
        q_simple(
            p,
            client,
            servers,
            file,
            "Is store credit refundable? (content in events only)",
            [(cite("kb-087#1", "never expires", "Store credit never expires."), "ok", "event_only capture mode")],
        )
    with instrumented(p, None):
        q_simple(
            p,
            client,
            servers,
            file,
            "Do refunds include shipping?",
            [(cite("kb-112#3", "issued within 5 business days", "Refunds take 5 days."), "ok", "")],
            reason="content_not_captured",
            note="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT unset",
        )
    p.shutdown()
    p = Pipeline(servers, 2, {"service.name": "help-center"}, SpanLimits(max_span_attribute_length=300))
    with instrumented(p, "span_only"):
        q_simple(
            p,
            client,
            servers,
            file,
            "How do exchanges work for sale items?",
            [(cite("kb-112#3", "issued within 5 business days", "Refunds take 5 days."), "ok", "")],
            reason="content_truncated",
            note="SpanLimits(max_span_attribute_length=300) cut the messages",
        )
    p.shutdown()
    lines = [to_file_json(path, raw) for path, raw in servers.otlp]
    redact(
        next(ln for ln in lines if any(CARD in str(attr(s, "gen_ai.input.messages")) for s in spans_of(ln))),
        f"My card {CARD} was charged twice, refund?",
    )
    return lines


def record_events(servers: Servers) -> list[dict]:
    file = "otlp_events.jsonl"
    client = openai.OpenAI(base_url=servers.base + "/v1", api_key="sk-local", max_retries=0)
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)  # the instrumentation's default (v1.30) conventions
    p = Pipeline(servers, 3, {"service.name": "help-center-legacy", "surface": "help-center-legacy"})
    with instrumented(p, "true"):
        q1(p, client, servers, file, "older events")
    p.shutdown()
    p = Pipeline(servers, 4, {})  # no service.name: the SDK writes unknown_service:<process>, so default_surface
    with instrumented(p, None):
        q_simple(
            p,
            client,
            servers,
            file,
            "Do refunds include shipping? (older events, capture off)",
            [(cite("kb-112#3", "issued within 5 business days", "Refunds take 5 days."), "ok", "")],
            reason="content_not_captured",
            note="capture unset: the events carry roles only",
            surface="default",
        )
    p.shutdown()
    return [to_file_json(path, raw) for path, raw in servers.otlp]


SPLIT_SURFACE = "help-center-web"


def record_split_events(servers: Servers) -> list[dict]:
    """The file-exporter layout (one signal per file): the older per-message events go to a logs file of their
    own; the request's root span names the surface (`app.surface`), the resource another."""
    file = "otlp_split_events_spans.jsonl"
    client = openai.OpenAI(base_url=servers.base + "/v1", api_key="sk-local", max_retries=0)
    os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    ROOT_ATTRIBUTES["app.surface"] = SPLIT_SURFACE
    p = Pipeline(servers, 5, {"service.name": "help-center-split"})
    with instrumented(p, "true"):
        q1(p, client, servers, file, "spans and log records in files of their own")
        CALLS[-1]["surface"] = SPLIT_SURFACE
        q_simple(
            p,
            client,
            servers,
            file,
            "Can store credit be used at once? (split files)",
            [(cite("kb-087#1", "Store credit is applied immediately", "Credit is immediate."), "ok", "")],
            surface=SPLIT_SURFACE,
        )
    p.shutdown()
    return [to_file_json(path, raw) for path, raw in servers.otlp]


def record_split_details(servers: Servers) -> list[dict]:
    """The current conventions with content in events only: each call's content on one log record, in a logs
    file of its own; the surface on the root span, two levels above the call (q2's inner workflow)."""
    file = "otlp_split_details_spans.jsonl"
    client = openai.OpenAI(base_url=servers.base + "/v1", api_key="sk-local", max_retries=0)
    os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    ROOT_ATTRIBUTES["app.surface"] = SPLIT_SURFACE
    p = Pipeline(servers, 6, {"service.name": "help-center-split"})
    with instrumented(p, "event_only"):
        q1(p, client, servers, file, "content in events only, in a logs file of its own")
        CALLS[-1]["surface"] = SPLIT_SURFACE
        q2(p, client, servers, file)
        CALLS[-1]["surface"] = SPLIT_SURFACE
    p.shutdown()
    return [to_file_json(path, raw) for path, raw in servers.otlp]


PHASES = {
    "otlp_attributes.jsonl": record_attributes,
    "otlp_events.jsonl": record_events,
    "otlp_split_events_spans.jsonl": record_split_events,
    "otlp_split_details_spans.jsonl": record_split_details,
}
SPLIT = {name: name.replace("_spans.jsonl", "_logs.jsonl") for name in PHASES if name.endswith("_spans.jsonl")}


def run_phase(name: str, part: Path) -> None:
    """One file, in this process: its lines and its expected rows (to `part`, merged by main)."""
    servers = Servers()
    try:
        lines = PHASES[name](servers)
    finally:
        servers.shutdown()
    if name in SPLIT:  # spans and log records in files of their own, as the file-exporter specification lays out
        logs = [ln for ln in lines if "resourceLogs" in ln]
        lines = [ln for ln in lines if "resourceLogs" not in ln]
        assert logs and lines, name
        (OUT / SPLIT[name]).write_text(
            "".join(json.dumps(ln, separators=(",", ":"), ensure_ascii=False) + "\n" for ln in logs), encoding="utf-8"
        )
    text = [json.dumps(ln, separators=(",", ":"), ensure_ascii=False) for ln in lines]
    expected = expectations(name, lines)
    if name == "otlp_attributes.jsonl":
        good = text[0]
        text.append(good[: len(good) // 2])  # a line cut mid-write
        bad = {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "DCF+anRpb24AAAAAAAAAAQ==",
                                    "spanId": "AQIDBAUGBwg=",
                                    "name": "chat gpt-4.1",
                                }
                            ]
                        }
                    ]
                }
            ]
        }
        text.append(json.dumps(bad, separators=(",", ":")))  # protobuf's own JSON mapping: base64 ids
        for no, reason, note in (
            (len(text) - 1, "invalid_json", "a line cut mid-write"),
            (len(text), "not_of_format", "base64 ids (protobuf's JSON mapping), not OTLP/JSON hex"),
        ):
            expected.append(
                {
                    "file": name,
                    "line_no": no,
                    "request_id": None,
                    "position": None,
                    "chunk_id": None,
                    "expected_reason": reason,
                    "note": note,
                }
            )
    (OUT / name).write_text("\n".join(text) + "\n", encoding="utf-8")
    part.write_text(json.dumps(expected), encoding="utf-8")


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--phase":
        run_phase(sys.argv[2], Path(sys.argv[3]))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    expected: list[dict] = []
    for name in PHASES:
        part = OUT / f".{name}.expected.tmp"
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        subprocess.run([sys.executable, __file__, "--phase", name, str(part)], check=True, env=env)
        expected += json.loads(part.read_text(encoding="utf-8"))
        part.unlink()
    expected.sort(key=lambda e: (e["file"], e["line_no"], e["request_id"] or "", e["position"] or 0))
    (OUT / "expected.jsonl").write_text(
        "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in expected), encoding="utf-8"
    )
    print(f"wrote {', '.join(PHASES)} and expected.jsonl ({len(expected)} rows) to {OUT.relative_to(ROOT)}")
    return 0


def expectations(name: str, lines: list[dict]) -> list[dict]:
    """One row per planted citation (its provenance reason) or per rejected call (its adapter reason), keyed by
    the request id the adapter gives (<traceId>/<spanId> of the chat span; chat spans matched to the planted
    calls by start time, the order the calls were made in). `retrieved` etc. say what the record must hold."""
    chats: list[tuple[int, int, str]] = []
    for no, ln in enumerate(lines, 1):
        for sp in spans_of(ln):
            if attr(sp, "gen_ai.operation.name") == "chat":
                chats.append((int(sp["startTimeUnixNano"]), no, f"{sp['traceId']}/{sp['spanId']}"))
    calls = [c for c in CALLS if c["file"] == name]
    assert len(calls) == len(chats), (name, len(calls), len(chats))
    for call, (_, line_no, rid) in zip(calls, sorted(chats)):  # calls were made in this order
        call["line_no"], call["request_id"] = line_no, rid
    rows = []
    for call in CALLS:
        if call["file"] != name:
            continue
        line_no, rid = call["line_no"], call["request_id"]
        meta = {k: call[k] for k in ("retrieved", "text_from_prompt", "left_out", "surface") if k in call}
        if call.get("reason"):
            rows.append(
                {
                    "file": name,
                    "line_no": line_no,
                    "request_id": rid,
                    "position": None,
                    "chunk_id": None,
                    "expected_reason": call["reason"],
                    "note": call.get("note", ""),
                    **meta,
                }
            )
            continue
        if not call["citations"]:
            rows.append(
                {
                    "file": name,
                    "line_no": line_no,
                    "request_id": rid,
                    "position": None,
                    "chunk_id": None,
                    "expected_reason": "citations_not_json",
                    "note": call.get("note", ""),
                    **meta,
                }
            )
        for pos, (c, reason, note) in enumerate(call["citations"]):
            rows.append(
                {
                    "file": name,
                    "line_no": line_no,
                    "request_id": rid,
                    "position": pos,
                    "chunk_id": c["chunk_id"],
                    "expected_reason": reason,
                    "note": note,
                    **meta,
                }
            )
    return rows


if __name__ == "__main__":
    sys.exit(main())
