"""Record OpenInference spans with the real instrumentors and write them as Phoenix exports them.

Run with `.venv-adapters/bin/python scripts/record_openinference_fixtures.py` (no network: every server is on
127.0.0.1). A small help-center RAG app is traced end to end:
- the app's pipeline step is a CHAIN span opened with openinference-instrumentation's own OITracer, with the
  surface set through `using_metadata` (so every span below carries `metadata`);
- retrieval is a real llama-index-core `BaseRetriever` (in-memory TextNodes, no embedding model: the results
  of each query are fixed by the scenario), traced by openinference-instrumentation-llama-index: RETRIEVER spans
  with `retrieval.documents.<i>.document.id|content|score|metadata`; one trace instead records its retriever
  with OITracer and `get_retriever_attributes` without ids, the layout LangChain's instrumentor writes (the
  chunk id only in `document.metadata`);
- the answer comes from the real openai client, traced by openinference-instrumentation-openai, against a local
  chat server (scripts/capture_server.py) that returns the app's JSON answer with its citations. Variants: one
  call with OPENINFERENCE_HIDE_INPUTS=true (input.value is `__REDACTED__`); one through a TracerProvider whose
  SpanLimits cut attributes at 400 characters (input.value cut mid-JSON); one through a llama-index CustomLLM
  over httpx, whose LLM span has only `llm.input_messages` (input.value holds llama-index's own arguments); one
  through a llama-index CustomLLM over the openai client (two LLM spans, llama-index's wrapping openai's); one
  through the real anthropic client, traced by openinference-instrumentation-anthropic, with the chunks sent as
  `search_result` blocks and an answer carrying native citations (one whose cited text is not at its location).
Spans are caught by the OpenTelemetry SDK's InMemorySpanExporter, with sequential trace/span ids (an
IdGenerator) and a clock that steps 1 ms per reading from 2026-11-02T09:00:00Z, so a rerun writes the same bytes.

Written to tests/fixtures/adapters/openinference/:
- phoenix_spans.jsonl: one span per line in the layout of Phoenix's span list (`GET /v1/projects/{id}/spans`,
  `Client().spans.get_spans()`): Phoenix stores `metadata` / `document.metadata` JSON strings as objects and
  returns every attribute flattened to dotted keys (src/phoenix/trace/otel.py `decode_otlp_span`,
  routers/v1/spans.py `span_search`); that transformation is reproduced here, Phoenix itself is not installed.
  Line 2 is a planted bad line (not JSON).
- phoenix_spans_dataframe.jsonl: the same spans as `get_spans_dataframe()` rows written with
  `to_json(orient="records", lines=True, date_format="iso")`: `attributes.<semantic convention>` columns,
  lists of documents and messages as lists of objects, metadata as an object (Phoenix's
  `_flatten_semantic_conventions`, reproduced).
- truth.jsonl: per citation, the provenance reason planted; calls.jsonl: per model call (the innermost LLM
  spans), what the adapter must make of it (a record with its retrieved ids, or a reject reason), and the LLM
  span that wraps it, if any.
The script checks, and prints, that every openai/anthropic span's input.value equals (as JSON) the body the
server received: the SDK parameters are the body in content, not in bytes (see lib/ingest/adapters/openinference.py).
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import sys
from datetime import datetime, timezone
from typing import Any

from capture_server import CaptureServer  # beside this script

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "adapters" / "openinference"

# --- a deterministic clock and ids, installed before anything reads the time ---------------------------------
T0_NS = int(datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc).timestamp()) * 1_000_000_000


class _Clock:
    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> int:
        self.ticks += 1
        return T0_NS + self.ticks * 1_000_000


CLOCK = _Clock()

import opentelemetry.sdk.trace as sdk_trace  # noqa: E402
from opentelemetry.sdk.trace import SpanLimits, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.sdk.trace.id_generator import IdGenerator  # noqa: E402

sdk_trace.time_ns = CLOCK  # the SDK reads span start/end times through this name

import openinference.instrumentation.llama_index._handler as li_handler  # noqa: E402

li_handler.time_ns = CLOCK  # the llama-index handler stamps its spans itself


class SequentialIds(IdGenerator):
    def __init__(self) -> None:
        self.span = 0x1000
        self.trace = 0

    def generate_span_id(self) -> int:
        self.span += 1
        return 0xA0C0000000000000 + self.span

    def generate_trace_id(self) -> int:
        self.trace += 1
        return 0x7F3A0000000000000000000000000000 + self.trace


IDS = SequentialIds()
EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider(id_generator=IDS)
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
# the same SDK with an attribute length limit (OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT), which cuts values silently
LIMITED = TracerProvider(id_generator=IDS, span_limits=SpanLimits(max_span_attribute_length=400))
LIMITED.add_span_processor(SimpleSpanProcessor(EXPORTER))

import anthropic  # noqa: E402
import httpx  # noqa: E402
import openai  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse, LLMMetadata  # noqa: E402
from llama_index.core.llms import CustomLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_chat_callback  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from openinference.instrumentation import (  # noqa: E402
    OITracer,
    TraceConfig,
    get_retriever_attributes,
    using_metadata,
)
from openinference.instrumentation.anthropic import AnthropicInstrumentor  # noqa: E402
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402
from openinference.instrumentation.openai import OpenAIInstrumentor  # noqa: E402

TRACER = OITracer(PROVIDER.get_tracer("help-center-app"), config=TraceConfig())

# --- the knowledge base and the app's prompt ----------------------------------------------------------------
KB = {
    "kb-112#3": "Refunds to the original card are issued within 5 business days of approval.",
    "kb-087#1": "Store credit is applied immediately after the returned item is scanned at our warehouse.",
    "kb-201#2": "Exchanges for a different size ship free of charge once the original item has arrived.",
    "kb-330#1": (
        "Orders paid with a gift card can be returned within 60 days. The refund goes back onto a new gift card, "
        "which is emailed to the purchaser and never expires, and it can be combined with other gift cards."
    ),
    "kb-415#2": "Damaged items must be reported within 48 hours of delivery, with a photo of the packaging.",
    "kb-520#1": "Return labels are free for members and cost $4.95 for everyone else.",
}
CHUNK_CHARS = 110  # the app cuts every chunk to this many characters (only kb-330#1 is longer)
TOP_K = 3  # the app renders the first TOP_K retrieved chunks and drops the rest
MODEL = "gpt-4.1-mini"
CLAUDE = "claude-sonnet-4-6"
SYSTEM_NATIVE = "Answer the customer's question from the search results only, and cite them."
SYSTEM = "Answer from the sources only. Reply in JSON: {answer, citations: [{chunk_id, span, claim}]}."


def render(chunks: list[tuple[str, str]]) -> str:
    lines = [f"(source: {cid}) {text[:CHUNK_CHARS]}" for cid, text in chunks[:TOP_K]]
    return SYSTEM + "\nSources:\n" + "\n".join(lines)


class ScenarioRetriever(BaseRetriever):
    """A llama-index retriever over in-memory nodes; the scenario fixes what each query returns."""

    def __init__(self, results: dict[str, list[tuple[str, float]]]) -> None:
        super().__init__()
        self._results = results
        self._nodes = {
            cid: TextNode(id_=cid, text=text, metadata={"doc_id": cid.split("#")[0]}) for cid, text in KB.items()
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=self._nodes[cid], score=s) for cid, s in self._results[query_bundle.query_str]]


class LocalLlama(CustomLLM):
    """A llama-index LLM talking to the local server over httpx: its span has only llm.input_messages."""

    base_url: str = ""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="llama-3.1-8b-instruct", is_chat_model=True)

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        body = {
            "model": "llama-3.1-8b-instruct",
            "messages": [{"role": m.role.value, "content": m.content} for m in messages],
        }
        reply = httpx.post(f"{self.base_url}/v1/chat/completions", json=body).json()
        return ChatResponse(message=ChatMessage(role="assistant", content=reply["choices"][0]["message"]["content"]))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise NotImplementedError

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError


class OpenAIBackedLlama(LocalLlama):
    """A llama-index LLM over the instrumented openai client: its LLM span wraps the SDK's LLM span."""

    openai_client: Any = None

    @llm_chat_callback()
    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        sent: list[Any] = [{"role": m.role.value, "content": m.content} for m in messages]
        reply = self.openai_client.chat.completions.create(model=MODEL, messages=sent, temperature=0)
        return ChatResponse(message=ChatMessage(role="assistant", content=reply.choices[0].message.content))


class ChatServer(CaptureServer):
    """Answers every chat completion with the next planted answer (the app's JSON)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer: dict = {}
        self.message: dict = {}

    def respond(self, path: str, request: dict) -> dict | None:
        if path.endswith("/v1/messages"):
            return self.message
        if not path.endswith("/chat/completions"):
            return None
        return {
            "id": f"chatcmpl-fx{len(self.bodies)}",
            "object": "chat.completion",
            "created": 1793610000,
            "model": request["model"] + "-2025-04-14" if request["model"] == MODEL else request["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": json.dumps(self.answer), "refusal": None},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 60, "total_tokens": 180},
        }


# --- the scenarios -------------------------------------------------------------------------------------------
# Each: surface, question, retrieved (chunk id, score) in rank order, how retrieval is traced, how the call is
# made, and the answer's citations with the reason each must get.
SCENARIOS: list[dict] = [
    {
        "name": "refund-timing",
        "surface": "help-center",
        "question": "How long do card refunds take for order 4411?",
        "retrieved": [("kb-112#3", 0.82), ("kb-087#1", 0.61), ("kb-520#1", 0.44), ("kb-201#2", 0.40)],
        "retriever": "llama-index",
        "call": "openai",
        "citations": [
            ("kb-112#3", "issued within 5 business days of approval", "ok", "the span is in the cited chunk"),
            ("kb-201#2", "ship free of charge", "dropped_before_prompt", "retrieved at rank 4, not rendered"),
            ("kb-999#9", "refunds are instant", "fabricated_id", "no chunk of that id was retrieved"),
            (
                "kb-087#1",
                "within 5 business days",
                "span_in_other_chunk",
                "the span is kb-112#3's, not the cited chunk's",
            ),
        ],
    },
    {
        "name": "gift-card-returns",
        "surface": "help-center",
        "question": "Can I return an order I paid for with a gift card? I really need my money back.",
        "retrieved": [("kb-330#1", 0.77), ("kb-112#3", 0.52)],
        "retriever": "llama-index",
        "call": "openai",
        "citations": [
            ("kb-330#1", "can be returned within 60 days", "ok", "in the rendered part of the cut chunk"),
            ("kb-330#1", "never expires", "span_truncated", "after the app's 110-character cut"),
            ("kb-112#3", "refunds take two weeks", "span_missing", "nowhere in the prompt"),
            ("kb-112#3", "I really need my money back", "span_outside_context", "quoted from the user's question"),
        ],
    },
    {
        "name": "damaged-item",
        "surface": "returns",
        "question": "My parcel arrived damaged, what do I do?",
        "retrieved": [("kb-415#2", 0.88), ("kb-520#1", 0.35)],
        "retriever": "manual-no-ids",  # LangChain's layout: ids only in document.metadata
        "late_retriever": [("kb-201#2", 0.5)],  # a second retrieval after the call: never paired with it
        "call": "openai",
        "citations": [
            ("kb-415#2", "within 48 hours of delivery", "ok", "chunk id from document.metadata.chunk_id"),
            ("kb-520#1", "cost $4.95", "ok", "second chunk of the metadata-id retriever"),
            ("kb-201#2", "ship free of charge", "fabricated_id", "only the retriever after the call returned it"),
        ],
    },
    {
        "name": "exchange-sizes",
        "surface": "returns",
        "question": "Do size exchanges cost anything?",
        "retrieved": [("kb-201#2", 0.91), ("kb-520#1", 0.47)],
        "retriever": "llama-index",
        "call": "llama-index-llm",  # only llm.input_messages: the body is rebuilt from them
        "citations": [
            ("kb-201#2", "ship free of charge", "ok", "prompt rebuilt from llm.input_messages"),
            ("kb-520#1", "free for members", "ok", "prompt rebuilt from llm.input_messages"),
        ],
    },
    {
        "name": "redacted",
        "surface": "help-center",
        "question": "Where is my store credit?",
        "retrieved": [("kb-087#1", 0.8)],
        "retriever": "llama-index",
        "call": "openai-hide-inputs",  # OPENINFERENCE_HIDE_INPUTS=true: input.value is __REDACTED__
        "reject": "content_redacted",
        "citations": [("kb-087#1", "applied immediately", None, "call rejected: content_redacted")],
    },
    {
        "name": "cut-prompt",
        "surface": "help-center",
        "question": "Is return shipping free?",
        "retrieved": [("kb-520#1", 0.86), ("kb-201#2", 0.5)],
        "retriever": "llama-index",
        "call": "openai-length-limit",  # the SDK's attribute length limit cuts input.value mid-JSON
        "reject": "content_truncated",
        "citations": [("kb-520#1", "free for members", None, "call rejected: content_truncated")],
    },
    {
        "name": "native-citations",
        "surface": "help-center",
        "question": "How fast are refunds and store credit?",
        "retrieved": [("kb-112#3", 0.9), ("kb-087#1", 0.7), ("kb-415#2", 0.3)],
        "retriever": "llama-index",
        "call": "anthropic",  # search_result blocks, Anthropic native citations (search_result_location)
        "citations": [
            ("kb-112#3", KB["kb-112#3"], "ok", "native citation, its cited text at its location"),
            (
                "kb-087#1",
                "Store credit is applied within 24 hours.",
                "location_mismatch",
                "native citation whose cited text is not in the search result it names",
            ),
        ],
    },
    {
        "name": "wrapped-call",
        "surface": "returns",
        "question": "Who pays for the return label?",
        "retrieved": [("kb-520#1", 0.84), ("kb-201#2", 0.41)],
        "retriever": "llama-index",
        "call": "llama-index-over-openai",  # two LLM spans, llama-index's over openai's: one call
        "citations": [
            ("kb-520#1", "cost $4.95 for everyone else", "ok", "the call is the openai span under llama-index's"),
            ("kb-201#2", "once the original item has arrived", "ok", "second rendered chunk"),
        ],
    },
]


def ask_claude(sc: dict, chunks: list[tuple[str, str]], server: ChatServer, claude: anthropic.Anthropic) -> str:
    """The app's Claude call: the chunks as search_result blocks; the server answers with native citations."""
    sent = chunks[: TOP_K - 1]
    blocks: list[Any] = [
        {
            "type": "search_result",
            "source": cid,
            "title": f"Help article {cid}",
            "content": [{"type": "text", "text": text[:CHUNK_CHARS]}],
            "citations": {"enabled": True},
        }
        for cid, text in sent
    ]
    index = {cid: i for i, (cid, _) in enumerate(sent)}
    server.message = {
        "id": "msg_fx_openinference_01",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": [
            {
                "type": "text",
                "text": f"{' ' if i else ''}Claim citing {cid}.",
                "citations": [
                    {
                        "type": "search_result_location",
                        "cited_text": cited,
                        "search_result_index": index[cid],
                        "source": cid,
                        "title": f"Help article {cid}",
                        "start_block_index": 0,
                        "end_block_index": 1,
                    }
                ],
            }
            for i, (cid, cited, _, _) in enumerate(sc["citations"])
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 210, "output_tokens": 48},
    }
    message = claude.messages.create(
        model=CLAUDE,
        max_tokens=400,
        system=SYSTEM_NATIVE,
        messages=[{"role": "user", "content": [*blocks, {"type": "text", "text": sc["question"]}]}],
    )
    return "".join(block.text for block in message.content if block.type == "text")


def run_scenario(
    sc: dict, server: ChatServer, client: openai.OpenAI, llama: LocalLlama, claude: anthropic.Anthropic
) -> None:
    server.answer = {
        "answer": f"Answer to: {sc['question']}",
        "citations": [
            {"chunk_id": cid, "span": span, "claim": f"Claim citing {cid}: {span}."}
            for cid, span, _, _ in sc["citations"]
        ],
    }
    with using_metadata({"surface": sc["surface"], "scenario": sc["name"]}):
        with TRACER.start_as_current_span("rag_answer", openinference_span_kind="chain") as chain:
            chain.set_input(sc["question"])
            chunks = retrieve(sc, sc["retrieved"])
            messages: list[Any] = [
                {"role": "system", "content": render(chunks)},
                {"role": "user", "content": sc["question"]},
            ]
            if sc["call"] == "anthropic":
                text = ask_claude(sc, chunks, server, claude)
            elif sc["call"].startswith("llama-index"):
                llm = OpenAIBackedLlama(openai_client=client) if sc["call"] == "llama-index-over-openai" else llama
                reply = llm.chat([ChatMessage(role=m["role"], content=m["content"]) for m in messages])
                text = reply.message.content
            else:
                completion = client.chat.completions.create(model=MODEL, messages=messages, temperature=0)
                text = completion.choices[0].message.content
            if sc.get("late_retriever"):
                retrieve(sc, sc["late_retriever"])
            chain.set_output(text)


def retrieve(sc: dict, results: list[tuple[str, float]]) -> list[tuple[str, str]]:
    if sc["retriever"] == "llama-index":
        nodes = ScenarioRetriever({sc["question"]: results}).retrieve(sc["question"])
        return [(n.node.node_id, n.node.get_content()) for n in nodes]
    with TRACER.start_as_current_span("retrieve", openinference_span_kind="retriever") as span:
        span.set_input(sc["question"])
        docs = [
            {"content": KB[cid], "score": score, "metadata": {"chunk_id": cid, "doc_id": cid.split("#")[0]}}
            for cid, score in results
        ]
        span.set_attributes(get_retriever_attributes(documents=docs))
    return [(cid, KB[cid]) for cid, _ in results]


# --- Phoenix's export layouts --------------------------------------------------------------------------------
JSON_STRING_ATTRIBUTES = ("document.metadata", "llm.prompt_template.variables", "metadata", "tool.parameters")


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _flatten(value: Any, prefix: str) -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [kv for k, v in value.items() for kv in _flatten(v, f"{prefix}.{k}")]
    return [(prefix, value)]


def phoenix_span(row: int, span: Any) -> dict:
    """The span as Phoenix's span list returns it (see the module docstring); `row` makes its GlobalID."""
    attrs: dict[str, Any] = {}
    for key, value in span.attributes.items():
        value = list(value) if isinstance(value, tuple) else value
        if key.endswith(JSON_STRING_ATTRIBUTES) and isinstance(value, str):
            try:
                loaded = json.loads(value)
            except ValueError:
                loaded = None
            if isinstance(loaded, dict) and loaded:  # stored as an object, returned flattened
                attrs.update(_flatten(loaded, key))
                continue
        attrs[key] = value
    kind = attrs.pop("openinference.span.kind", "UNKNOWN")
    return {
        "id": base64.b64encode(f"Span:{row}".encode()).decode(),
        "name": span.name,
        "context": {"trace_id": f"{span.context.trace_id:032x}", "span_id": f"{span.context.span_id:016x}"},
        "span_kind": kind,
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "start_time": _iso(span.start_time),
        "end_time": _iso(span.end_time),
        "status_code": span.status.status_code.name,
        "status_message": span.status.description or "",
        "attributes": attrs,
        "events": [],
    }


SEMCONV_LISTS = ("retrieval.documents", "llm.input_messages", "llm.output_messages")


def dataframe_row(span: Any) -> dict:
    """The span as a get_spans_dataframe() row written by to_json(orient="records", lines=True, date_format="iso")."""
    row: dict[str, Any] = {
        "name": span.name,
        "span_kind": span.attributes.get("openinference.span.kind", "UNKNOWN"),
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "start_time": datetime.fromtimestamp(span.start_time / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[
            :-3
        ]
        + "Z",
        "end_time": datetime.fromtimestamp(span.end_time / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        + "Z",
        "status_code": span.status.status_code.name,
        "status_message": span.status.description or "",
        "events": [],
        "context.span_id": f"{span.context.span_id:016x}",
        "context.trace_id": f"{span.context.trace_id:032x}",
    }
    lists: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in span.attributes.items():
        value = list(value) if isinstance(value, tuple) else value
        if key.endswith(JSON_STRING_ATTRIBUTES) and isinstance(value, str):
            try:
                loaded = json.loads(value)
                value = loaded if isinstance(loaded, dict) and loaded else value
            except ValueError:
                pass
        if key == "openinference.span.kind":
            continue
        for prefix in SEMCONV_LISTS:
            if key.startswith(prefix + "."):
                index, _, rest = key[len(prefix) + 1 :].partition(".")
                lists.setdefault(prefix, {}).setdefault(int(index), {})[rest] = value
                break
        else:
            row[f"attributes.{key}"] = value
    for prefix, items in lists.items():
        row[f"attributes.{prefix}"] = [items[i] for i in sorted(items)]
    return row


def main() -> None:
    server = ChatServer()
    try:
        OpenAIInstrumentor().instrument(tracer_provider=PROVIDER)
        LlamaIndexInstrumentor().instrument(tracer_provider=PROVIDER)
        AnthropicInstrumentor().instrument(tracer_provider=PROVIDER)
        claude = anthropic.Anthropic(base_url=server.base, api_key="sk-ant-local", max_retries=0)
        client = openai.OpenAI(base_url=server.base + "/v1", api_key="sk-local", max_retries=0)
        llama = LocalLlama(base_url=server.base)
        for sc in SCENARIOS:
            special = sc["call"] in ("openai-hide-inputs", "openai-length-limit")
            if special:  # the instrumentor reads OPENINFERENCE_HIDE_INPUTS and its provider when instrumented
                OpenAIInstrumentor().uninstrument()
                if sc["call"] == "openai-hide-inputs":
                    os.environ["OPENINFERENCE_HIDE_INPUTS"] = "true"
                OpenAIInstrumentor().instrument(tracer_provider=LIMITED if "limit" in sc["call"] else PROVIDER)
            run_scenario(sc, server, client, llama, claude)
            if special:
                OpenAIInstrumentor().uninstrument()
                os.environ.pop("OPENINFERENCE_HIDE_INPUTS", None)
                OpenAIInstrumentor().instrument(tracer_provider=PROVIDER)
    finally:
        server.shutdown()
    spans = sorted(EXPORTER.get_finished_spans(), key=lambda s: (s.context.trace_id, s.start_time))
    write(spans, server)


def _under(by_id: dict, span: Any, ancestor: int) -> bool:
    parent = span.parent.span_id if span.parent else None
    while parent in by_id:
        if parent == ancestor:
            return True
        above = by_id[parent].parent
        parent = above.span_id if above else None
    return False


def write(spans: list, server: ChatServer) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    phoenix = [json.dumps(phoenix_span(row, s), ensure_ascii=False) for row, s in enumerate(spans, 1)]
    phoenix.insert(1, '{"context": {"trace_id": "7f3a", "span_id": "c2"}, "span_kind": "LLM", "attributes": {')
    (OUT / "phoenix_spans.jsonl").write_text("\n".join(phoenix) + "\n", encoding="utf-8")
    frame = [json.dumps(dataframe_row(s), ensure_ascii=False) for s in spans]
    (OUT / "phoenix_spans_dataframe.jsonl").write_text("\n".join(frame) + "\n", encoding="utf-8")

    # the truth: per LLM span, in trace order = scenario order
    llm_all = [s for s in spans if s.attributes.get("openinference.span.kind") == "LLM"]
    by_id = {s.context.span_id: s for s in spans}
    wrappers = set()
    for span in llm_all:  # an LLM span with an LLM span below it wraps the SDK's call
        parent = span.parent.span_id if span.parent else None
        while parent in by_id:
            if by_id[parent].attributes.get("openinference.span.kind") == "LLM":
                wrappers.add(parent)
            above = by_id[parent].parent
            parent = above.span_id if above else None
    llm_spans = [s for s in llm_all if s.context.span_id not in wrappers]
    if len(llm_spans) != len(SCENARIOS):
        sys.exit(f"expected {len(SCENARIOS)} LLM spans, got {len(llm_spans)}: {[s.name for s in llm_spans]}")
    truth, calls = [], []
    for sc, span in zip(SCENARIOS, llm_spans, strict=True):
        request_id = f"{span.context.span_id:016x}"
        reject = sc.get("reject")
        calls.append(
            {
                "request_id": request_id,
                "scenario": sc["name"],
                "surface": sc["surface"],
                "reason": reject,
                "retrieved": [] if reject else [cid for cid, _ in sc["retrieved"]],
                "wrapped_by": next((f"{w:016x}" for w in wrappers if span.parent and _under(by_id, span, w)), None),
            }
        )
        if reject:
            continue
        for pos, (cid, _span, reason, note) in enumerate(sc["citations"]):
            truth.append(
                {"request_id": request_id, "position": pos, "chunk_id": cid, "expected_reason": reason, "note": note}
            )
    (OUT / "truth.jsonl").write_text("".join(json.dumps(t) + "\n" for t in truth), encoding="utf-8")
    (OUT / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls), encoding="utf-8")

    # evidence for prompt_reconstructed: the SDK's kwargs (input.value) against the bytes the server received
    wire = [json.loads(body) for path, body in server.bodies if path.endswith(("/chat/completions", "/messages"))]
    same: list[bool | None] = []
    for span in llm_spans:
        value = span.attributes.get("input.value")
        if span.attributes.get("input.mime_type") == "application/json" and isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:  # the cut one
                same.append(None)
                continue
            same.append(any(parsed == w for w in wire))
    print(f"{len(spans)} spans, {len(llm_spans)} LLM calls, {len(truth)} citations; input.value == wire body: {same}")


if __name__ == "__main__":
    main()
