"""Run every example of docs/guard.md against the real LangChain, LlamaIndex, OpenAI and Anthropic packages.

Run it with `make guard-examples` (the `fixtures` extra in `.venv-fixtures`, from `make fixtures`).

The doc is the source, so doc and test cannot drift: every ```python block of docs/guard.md must be a
`guard-example:NAME` block, the names must be exactly EXAMPLES, in order, and each block is exec'd as
written into one module (tracebacks point at the doc's lines). The field tables of the doc's "Results"
section must list exactly the fields and properties of the guard's result classes.

No network: sockets may connect to 127.0.0.1 only. The SDKs find the local server through their own
environment variables (OPENAI_BASE_URL, OPENAI_API_BASE, ANTHROPIC_BASE_URL); it records each request
body and answers with a canned answer. Each example is run three times:
  honest     the answer passes; one request; one log line that citegate parses, whose prompt decodes to the
             messages really sent, and whose citations the guard finds ok (positions resolved as expected);
  cut        a chunk cut by the token budget: GuardError naming it, before any request (LlamaIndex: when
             query returns, before the answer does; the call is logged);
  fabricated a citation of a chunk that is not in the prompt (Anthropic: a span in no document): GuardError
             naming that citation; the call is logged.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata as md
import importlib.util
import json
import logging
import os
import re
import socket
import sys
import tempfile
import types
from datetime import datetime, timezone
from pathlib import Path

from capture_server import CaptureServer  # beside this script, shared with render_fixtures.py

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "guard.md"
sys.path.insert(0, str(ROOT))  # the fixtures venv does not install citegate: the guard needs only its pure modules

EXAMPLES = ["setup", "langchain", "llamaindex", "openai", "anthropic"]
HEAVY = ("dagster", "duckdb", "polars", "pyarrow")

from citegate_assets import guard  # noqa: E402

assert not {m.split(".")[0] for m in sys.modules} & set(HEAVY), "the guard imported a pipeline dependency"
from citegate_assets.lib.ingest.containers import decode_body  # noqa: E402
from citegate_assets.lib.ingest.records import Record, parse_line  # noqa: E402

# --- no network ----------------------------------------------------------------------------------------
_connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex


def _loopback_only(address) -> None:
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and not host.startswith("/"):
        raise ConnectionRefusedError(f"check_guard_examples: no network ({host})")


def _guarded_connect(self, address):
    _loopback_only(address)
    return _connect(self, address)


def _guarded_connect_ex(self, address):
    _loopback_only(address)
    return _connect_ex(self, address)


socket.socket.connect, socket.socket.connect_ex = _guarded_connect, _guarded_connect_ex


# --- the scenario ---------------------------------------------------------------------------------------
REFUNDS, PLANS, RETENTION, UNKNOWN = (
    "acme-kb/refunds.md#c1",
    "acme-kb/plans.md#c1",
    "acme-kb/data-retention.md#c1",
    "acme-kb/refunds.md#c4",
)
CHUNKS = {
    REFUNDS: "Refunds are issued to the original payment method. Once a refund is approved, it takes 3\u20135 business "
    "days to appear on your statement.\nAnnual plans are refunded pro rata for the unused months.",
    PLANS: "The Pro plan costs $49 per month per workspace & includes up to 10 seats. Extra seats cost $6 each, billed "
    "on the next invoice.",
    RETENTION: "Deleted workspaces are kept in a recoverable state for 30 days. During that time an owner can restore "
    "the workspace from **Settings \u2192 Danger zone**; after 30 days it is scheduled for permanent deletion.\n\n"
    "Backups are encrypted with AES-256 and stored in two regions of the customer\u2019s choice. Backup copies "
    "are purged within 90 days of the permanent deletion, and a deletion certificate can be requested from the "
    "privacy team once the purge is complete.",
}
QUESTION = "How long does a refund take, and what does the Pro plan cost?"
RETRIEVED = [{"chunk_id": cid, "rank": rank, "text": text} for rank, (cid, text) in enumerate(CHUNKS.items(), 1)]
CUT_AT = CHUNKS[RETENTION].index(" Backup copies")  # the app's token budget keeps the first part only
CONTEXT_WHOLE = [{"chunk_id": cid, "text": text} for cid, text in CHUNKS.items()]
CONTEXT_CUT = [dict(c, text=c["text"][:CUT_AT]) if c["chunk_id"] == RETENTION else c for c in CONTEXT_WHOLE]

ANSWER = "A refund takes 3-5 business days. Pro costs $49 per month."
HONEST = [  # hyphen where the chunk has an en dash: normalization, as the pipeline does it
    {
        "chunk_id": REFUNDS,
        "span": "it takes 3-5 business days to appear on your statement",
        "claim": "A refund takes 3-5 business days.",
    },
    {"chunk_id": PLANS, "span": "The Pro plan costs $49 per month per workspace", "claim": "Pro costs $49 per month."},
]
FABRICATED = {
    "chunk_id": UNKNOWN,
    "span": "Refunds are issued to the original payment method.",
    "claim": "Refunds go back to the original payment method.",
}
# LlamaIndex: the model cites the Source numbers of CitationQueryEngine's prompt (Source 1 = first node)
HONEST_SOURCES = [dict(HONEST[0], chunk_id="1"), dict(HONEST[1], chunk_id="2")]
FABRICATED_SOURCE = dict(FABRICATED, chunk_id="9")  # no Source 9 in the prompt
# Anthropic: citations point at a document block, so a wrong id cannot happen; a quote in no document can
INVENTED_QUOTE = {"chunk_id": REFUNDS, "span": "Refunds are instant for annual plans.", "claim": "Refunds are instant."}


# --- the local LLM server --------------------------------------------------------------------------------
class LocalLLM(CaptureServer):
    """Answers with `reply` ({answer, citations}) in the shape of the API asked."""

    def __init__(self) -> None:
        self.reply: dict = {}
        super().__init__()

    def respond(self, path: str, request: dict) -> dict | None:
        if path.endswith("/chat/completions"):
            return {
                "id": "chatcmpl-local",
                "object": "chat.completion",
                "created": 1793750400,
                "model": request["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "logprobs": None,
                        "message": {"role": "assistant", "content": json.dumps(self.reply)},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        if path.endswith("/messages"):  # Anthropic: one text block per claim, with char_location citations
            docs = [
                b
                for m in request["messages"]
                if isinstance(m["content"], list)
                for b in m["content"]
                if b.get("type") == "document"
            ]
            content = []
            for c in self.reply["citations"]:
                if content:  # the uncited text between two cited claims, as Anthropic returns it
                    content.append({"type": "text", "text": " "})
                index = next(i for i, d in enumerate(docs) if d["title"] == c["chunk_id"])
                start = max(docs[index]["source"]["data"].find(c["span"]), 0)
                content.append(
                    {
                        "type": "text",
                        "text": c["claim"],
                        "citations": [
                            {
                                "type": "char_location",
                                "cited_text": c["span"],
                                "document_index": index,
                                "document_title": c["chunk_id"],
                                "start_char_index": start,
                                "end_char_index": start + len(c["span"]),
                            }
                        ],
                    }
                )
            return {
                "id": "msg_local",
                "type": "message",
                "role": "assistant",
                "model": request["model"],
                "content": content,
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        return None


# --- the doc's examples --------------------------------------------------------------------------------
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)


def doc_examples() -> list[tuple[str, int, str]]:
    """(name, first line in the doc, code) of every guard-example block; fails on a python block that is not one."""
    text = DOC.read_text(encoding="utf-8")
    blocks = []
    for m in FENCE.finditer(text):
        info = m.group("info").split()
        if not info or info[0] != "python":
            continue
        tag = info[1] if len(info) > 1 else ""
        if not tag.startswith("guard-example:"):
            raise SystemExit(
                f"{DOC.name}: a python block that is not a guard-example (so not run): {m.group('code')[:60]!r}"
            )
        blocks.append((tag.removeprefix("guard-example:"), text.count("\n", 0, m.start("code")) + 1, m.group("code")))
    names = [n for n, _, _ in blocks]
    if names != EXAMPLES:
        raise SystemExit(f"{DOC.name}: guard-example blocks {names}, expected {EXAMPLES}")
    return blocks


def load_examples() -> types.ModuleType:
    module = types.ModuleType("guard_examples")
    module.__file__ = str(DOC)
    sys.modules[module.__name__] = module
    for _name, line, code in doc_examples():
        exec(compile("\n" * (line - 1) + code, str(DOC), "exec"), module.__dict__)
    return module


def check_doc_tables() -> None:
    """The Results tables list exactly each result class's fields and properties."""
    text = DOC.read_text(encoding="utf-8")
    for cls in (guard.PromptReport, guard.ChunkArrival, guard.CitationsReport, guard.CitationVerdict):
        m = re.search(
            rf"^`{cls.__name__}`[^\n]*:\n\n\| field \| meaning \|\n\|---\|---\|\n((?:\|[^\n]*\n)+)", text, re.M
        )
        assert m, f"{DOC.name}: no field table for {cls.__name__}"
        documented = re.findall(r"^\| `(\w+)` \|", m.group(1), re.M)
        actual = [f.name for f in dataclasses.fields(cls)] + [
            n for n, v in vars(cls).items() if isinstance(v, property)
        ]
        assert documented == actual, f"{DOC.name}: {cls.__name__} table lists {documented}, the class has {actual}"


# --- running them --------------------------------------------------------------------------------------
class Run:
    def __init__(self, llm: LocalLLM, landing: Path):
        self.llm, self.landing = llm, landing

    def __call__(
        self,
        example: str,
        case: str,
        reply_citations: list[dict],
        call,
        *,
        path: str,
        sent: int,
        logged: int,
        failures: list[str] | None = None,
        checked: list[str] | None = None,
    ) -> str:
        self.llm.reply = {"answer": ANSWER, "citations": reply_citations}
        self.llm.bodies.clear()
        for f in self.landing.iterdir():
            f.unlink()
        where = f"{example} {case}"
        try:
            answer = call()
            raised = None
        except guard.GuardError as err:
            raised = err
        if failures is None:
            assert raised is None, f"{where}: {raised}"
            assert answer == ANSWER, f"{where}: answer {answer!r}"
        else:
            assert raised is not None, f"{where}: no GuardError"
            assert raised.failures == failures, f"{where}: {raised.failures}"
        assert len(self.llm.bodies) == sent, f"{where}: {len(self.llm.bodies)} requests sent, expected {sent}"
        assert all(p.endswith(path) for p, _ in self.llm.bodies), f"{where}: {[p for p, _ in self.llm.bodies]}"
        lines = [ln for f in self.landing.glob("*.jsonl") for ln in f.read_text(encoding="utf-8").splitlines()]
        assert len(lines) == logged, f"{where}: {len(lines)} log lines, expected {logged}"
        if lines:
            record = parse_line(lines[0], datetime.now(timezone.utc))
            assert isinstance(record, Record), f"{where}: citegate rejects the log line: {record}"
            checked_msgs = [(m.role, m.text) for m in decode_body(record.prompt, record.prompt_encoding).messages]
            sent_msgs = [(m.role, m.text) for m in decode_body(self.llm.bodies[0][1].decode("utf-8"), "json").messages]
            assert checked_msgs == sent_msgs, f"{where}: the prompt checked and logged is not the prompt sent"
            assert [r["text"] for r in record.retrieved] == [r["text"] for r in RETRIEVED], f"{where}: retrieved"
            if failures is None:  # the nightly view of the logged call: every citation ok
                report = guard.check_citations(record.prompt, record.retrieved, record.citations, encoding="json")
                assert report.ok and [c.reason for c in report.citations] == ["ok"] * len(HONEST), (
                    f"{where}: {report.failures}"
                )
                assert [c.checked_chunk_id for c in report.citations] == checked, f"{where}: {report.citations}"
                assert all(a.arrived == "whole" for a in report.prompt.chunks), f"{where}: {report.prompt.chunks}"
        result = "ok" if failures is None else "GuardError " + "; ".join(failures)
        return f"{example:11s} {case:10s} {result}  (requests sent: {sent}, log lines: {logged})"


def llamaindex_engine(cut: bool):
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.query_engine import CitationQueryEngine
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.llms.openai import OpenAI

    examples = sys.modules["guard_examples"]

    class FixedRetriever(BaseRetriever):
        """The scenario's retrieval (no embedding model offline); everything after it is LlamaIndex's."""

        def _retrieve(self, query_bundle):
            return [
                NodeWithScore(node=TextNode(id_=r["chunk_id"], text=r["text"]), score=1.0 - r["rank"] / 10)
                for r in RETRIEVED
            ]

    class TokenBudget(BaseNodePostprocessor):
        """The app's token budget, cutting the retention chunk as CONTEXT_CUT does."""

        def _postprocess_nodes(self, nodes, query_bundle=None):
            for n in nodes:
                if n.node.node_id == RETENTION:
                    n.node.set_content(n.node.get_content()[:CUT_AT])
            return nodes

    # the doc's engine, with the fixed retriever for index.as_retriever()
    llm = OpenAI(model="gpt-4o-mini", system_prompt=examples.CITE_AS_JSON)
    return CitationQueryEngine(FixedRetriever(), llm=llm, node_postprocessors=[TokenBudget()] if cut else [])


def main() -> None:
    # LangChain logs a warning for the GuardError it then raises: the run's own lines say it
    logging.getLogger("langchain_core.callbacks.manager").setLevel(logging.ERROR)
    check_doc_tables()
    llm = LocalLLM()
    landing = Path(tempfile.mkdtemp(prefix="citegate-guard-examples-"))
    os.environ.update(
        {
            "CITEGATE_LOGS": str(landing),
            "OPENAI_BASE_URL": f"{llm.base}/v1",
            "OPENAI_API_BASE": f"{llm.base}/v1",
            "OPENAI_API_KEY": "sk-local",
            "ANTHROPIC_BASE_URL": llm.base,
            "ANTHROPIC_API_KEY": "sk-ant-local",
        }
    )
    ex = load_examples()
    run = Run(llm, landing)
    cut = [f"{RETENTION}: cut"]
    fab = [f"citation 2 ({UNKNOWN}): fabricated_id"]
    out = []

    for name, fn, path in (
        ("langchain", ex.answer_with_langchain, "/v1/chat/completions"),
        ("openai", ex.answer_with_openai, "/v1/chat/completions"),
    ):
        out.append(
            run(
                name,
                "honest",
                HONEST,
                functools.partial(fn, QUESTION, RETRIEVED, CONTEXT_WHOLE),
                path=path,
                sent=1,
                logged=1,
                checked=[REFUNDS, PLANS],
            )
        )
        out.append(
            run(
                name,
                "cut",
                HONEST,
                functools.partial(fn, QUESTION, RETRIEVED, CONTEXT_CUT),
                path=path,
                sent=0,
                logged=0,
                failures=cut,
            )
        )
        out.append(
            run(
                name,
                "fabricated",
                HONEST + [FABRICATED],
                functools.partial(fn, QUESTION, RETRIEVED, CONTEXT_WHOLE),
                path=path,
                sent=1,
                logged=1,
                failures=fab,
            )
        )

    path = "/v1/chat/completions"
    out.append(
        run(
            "llamaindex",
            "honest",
            HONEST_SOURCES,
            lambda: ex.answer_with_llamaindex(llamaindex_engine(False), QUESTION),
            path=path,
            sent=1,
            logged=1,
            checked=[REFUNDS, PLANS],
        )
    )
    out.append(
        run(
            "llamaindex",
            "cut",
            HONEST_SOURCES,
            lambda: ex.answer_with_llamaindex(llamaindex_engine(True), QUESTION),
            path=path,
            sent=1,
            logged=1,
            failures=cut,
        )
    )
    out.append(
        run(
            "llamaindex",
            "fabricated",
            HONEST_SOURCES + [FABRICATED_SOURCE],
            lambda: ex.answer_with_llamaindex(llamaindex_engine(False), QUESTION),
            path=path,
            sent=1,
            logged=1,
            failures=["citation 2 (9): fabricated_id"],
        )
    )
    assert not ex.capture.calls, f"llamaindex: captured calls left behind: {list(ex.capture.calls)}"

    fn, path = ex.answer_with_anthropic, "/v1/messages"
    out.append(
        run(
            "anthropic",
            "honest",
            HONEST,
            lambda: fn(QUESTION, RETRIEVED, CONTEXT_WHOLE),
            path=path,
            sent=1,
            logged=1,
            checked=[REFUNDS, PLANS],
        )
    )
    out.append(
        run(
            "anthropic",
            "cut",
            HONEST,
            lambda: fn(QUESTION, RETRIEVED, CONTEXT_CUT),
            path=path,
            sent=0,
            logged=0,
            failures=cut,
        )
    )
    out.append(
        run(
            "anthropic",
            "fabricated",
            HONEST + [INVENTED_QUOTE],
            lambda: fn(QUESTION, RETRIEVED, CONTEXT_WHOLE),
            path=path,
            sent=1,
            logged=1,
            failures=[f"citation 2 ({REFUNDS}): span_missing"],
        )
    )

    llm.shutdown()
    for f in landing.iterdir():
        f.unlink()
    landing.rmdir()
    present = [m for m in HEAVY if importlib.util.find_spec(m) is not None]
    versions = ", ".join(
        f"{p} {md.version(p)}"
        for p in (
            "langchain-core",
            "langchain-classic",
            "langchain-openai",
            "llama-index-core",
            "llama-index-llms-openai",
            "openai",
            "anthropic",
        )
    )
    print("\n".join(out))
    print(
        f"{len(out)} runs of the {len(EXAMPLES)} blocks of docs/guard.md passed; {versions}; "
        f"pipeline packages in this venv: {present or 'none'}"
    )


if __name__ == "__main__":
    main()
