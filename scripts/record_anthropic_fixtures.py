"""Record Anthropic exchanges with native citations: the real `anthropic` SDK against a loopback server.

Run with the adapters venv (it has anthropic 2.14.0; nothing else is needed):

    .venv-adapters/bin/python scripts/record_anthropic_fixtures.py

Each scenario below is one `client.messages.create(...)` call made by the real SDK to a server on 127.0.0.1
that records the request body byte for byte and answers with a canned Messages response carrying native
citations (`char_location`, `page_location`, `content_block_location`, `search_result_location`,
`web_search_result_location`). What the script writes is what an app logging its calls would write: one line
per call, `{"request": <the body as the SDK sent it>, "response": <the Message as the SDK parsed it,
message.to_dict(mode="json")>, "logged_at", "surface"}`, plus the app's own `retrieved` where the scenario
needs it. One line keeps the request as the raw body text (a string), the others as the parsed object.

Outputs (committed; the tests never run this script):
- tests/fixtures/adapters/anthropic/exchanges.jsonl: the exchanges;
- tests/fixtures/adapters/anthropic/expected.jsonl: per citation, the planted provenance reason, chunk id and
  whether a location mismatch is planted (and a phrase of its detail); per call without citations, the
  answer reject.

Deterministic: ids, timestamps and texts are fixed here; the SDK adds nothing random to a request body (its
retry and idempotency headers are headers). Before writing, every planted char/block location is checked
against the body actually sent, so a planted `ok` is a real match and a planted mismatch a real mismatch.
"""

from __future__ import annotations

import base64
import importlib.metadata as md
import json
import pathlib

from capture_server import CaptureServer  # beside this script

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "adapters" / "anthropic"
MODEL = "claude-sonnet-4-6"
SURFACE = "help-center"
SYSTEM = "Answer the customer's question from the documents only, and cite them."

# --- the knowledge base -------------------------------------------------------------------------------
REFUNDS = (
    "Refunds to the original card are issued within 5 business days of approval. "
    "Approval itself takes one business day."
)
REFUNDS_LONG = (
    "Refunds to the original card are issued within 5 business days of approval. "
    "Approval itself takes one business day. "
    "Refunds to a bank account take up to 10 business days. "
    "Refunds of purchases older than 180 days are issued as store credit."
)
REFUNDS_SENT = REFUNDS_LONG[: REFUNDS_LONG.index(" Refunds to a bank")]  # the app's token budget cut it here
GIFT = ("Gift cards are not refundable.", "A lost gift card can be reissued once.")
PLANS = ("Annual plans are refunded pro rata for the unused months.", "Monthly plans are not refunded after 14 days.")
CREDIT = "Store credit is applied immediately and never expires."
CREDIT_CONTEXT = json.dumps({"chunk_id": "kb-087#1", "updated": "2026-10-02"})
FEES = "Refund requests are free of charge; the card network's fee is not returned."
ORDERS = "Orders are refunded as a whole; partial refunds need a support ticket."
CHARGEBACK = "Chargebacks are handled by the card issuer, not by us."
PDF = base64.b64encode(
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Count 0/Kids[]>>endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n"
).decode()


CARD_TERMS = (  # the pages of a PDF made with fpdf2: long sentences wrap, so the PDF's text breaks lines
    "Card terms. Refunds to the original card are issued within 5 business days of approval, and no fee is "
    "charged for refunds to the original card. Statements show the refund as a credit from the store.",
    "Disputes. A card payment disputed with the issuer is frozen until the dispute is closed, and the store "
    "answers the issuer within 10 business days of being asked.",
)


def card_terms_pdf(encrypted: bool = False) -> str:
    """A two-page PDF of CARD_TERMS (fpdf2, fixed creation date: the same bytes each run), base64."""
    import datetime as dt

    from fpdf import FPDF  # type: ignore[import-not-found]  # only in .venv-adapters

    pdf = FPDF()
    pdf.set_creation_date(dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc))
    pdf.set_font("helvetica", size=12)
    if encrypted:
        pdf.set_encryption(owner_password="owner-secret", user_password="")
    for page in CARD_TERMS:
        pdf.add_page()
        pdf.multi_cell(0, 8, page)
    return base64.b64encode(bytes(pdf.output())).decode()


def pdf_doc(data: str, title: str) -> dict:
    return {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
        "title": title,
        "citations": {"enabled": True},
    }


def page(cited: str, first: int, title: str = "card-terms.pdf", doc_index: int = 0) -> dict:
    return {
        "type": "page_location",
        "cited_text": cited,
        "document_index": doc_index,
        "document_title": title,
        "start_page_number": first,
        "end_page_number": first + 1,
        "file_id": None,
    }


def text_doc(data: str, title: str | None = None, context: str | None = None) -> dict:
    doc: dict = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": data}}
    if title is not None:
        doc["title"] = title
    if context is not None:
        doc["context"] = context
    doc["citations"] = {"enabled": True}
    return doc


def content_doc(blocks: tuple[str, ...], title: str) -> dict:
    return {
        "type": "document",
        "source": {"type": "content", "content": [{"type": "text", "text": t} for t in blocks]},
        "title": title,
        "citations": {"enabled": True},
    }


def search_result(blocks: tuple[str, ...], source: str, title: str) -> dict:
    return {
        "type": "search_result",
        "source": source,
        "title": title,
        "content": [{"type": "text", "text": t} for t in blocks],
        "citations": {"enabled": True},
    }


def char(doc_index: int, doc_text: str, cited: str, title: str | None, shift: int = 0, **over) -> dict:
    start = doc_text.index(cited) + shift
    cit = {
        "type": "char_location",
        "cited_text": cited,
        "document_index": doc_index,
        "document_title": title,
        "start_char_index": start,
        "end_char_index": start + len(cited),
        "file_id": None,
    }
    return {**cit, **over}


def blocks_cit(doc_index: int, blocks: tuple[str, ...], start: int, end: int, title: str, cited: str | None = None):
    return {
        "type": "content_block_location",
        "cited_text": "".join(blocks[start:end]) if cited is None else cited,
        "document_index": doc_index,
        "document_title": title,
        "start_block_index": start,
        "end_block_index": end,
        "file_id": None,
    }


def result_cit(index: int, blocks: tuple[str, ...], start: int, end: int, source: str, title: str) -> dict:
    return {
        "type": "search_result_location",
        "cited_text": "".join(blocks[start:end]),
        "search_result_index": index,
        "source": source,
        "title": title,
        "start_block_index": start,
        "end_block_index": end,
    }


def text(t: str, *citations: dict) -> dict:
    block: dict = {"type": "text", "text": t}
    if citations:
        block["citations"] = list(citations)
    return block


def user(*content: dict | str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": c} if isinstance(c, str) else c for c in content]}


# --- the scenarios ------------------------------------------------------------------------------------
# each: id, request kwargs, response content blocks, optional app `retrieved`, and per citation (in order of
# the text blocks) the planted (reason, chunk id, mismatch phrase or None, note); or the answer reject.


def scenarios() -> list[dict]:
    q = "How long do card refunds take, and what about gift cards, plans and store credit?"
    docs_1 = [
        text_doc(REFUNDS, title="kb-112#3"),
        content_doc(GIFT, "kb-301#1"),
        search_result(PLANS, "kb-200#1", "Plan refunds"),
        text_doc(CREDIT, title="Store credit", context=CREDIT_CONTEXT),
    ]
    out: list[dict] = [
        {
            "id": "msg_fx_anthropic_01",
            "note": "every citable block kind, every location verified",
            "raw_request": True,
            "messages": [user(*docs_1, q)],
            "content": [
                text("Card refunds are issued "),
                text(
                    "within 5 business days of approval",
                    char(
                        0,
                        REFUNDS,
                        "Refunds to the original card are issued within 5 business days of approval. ",
                        "kb-112#3",
                    ),
                ),
                text(". Gift cards "),
                text("cannot be refunded but can be reissued once", blocks_cit(1, GIFT, 0, 2, "kb-301#1")),
                text(". Annual plans "),
                text("are refunded pro rata", result_cit(0, PLANS, 0, 1, "kb-200#1", "Plan refunds")),
                text(", and store credit "),
                text("never expires", char(2, CREDIT, CREDIT, "Store credit")),
                text("."),
            ],
            "expect": [
                ("ok", "kb-112#3", None, "char_location into a text document"),
                ("ok", "kb-301#1", None, "content_block_location over two blocks (cited text joined with nothing)"),
                ("ok", "kb-200#1", None, "search_result_location, one block"),
                ("ok", "kb-087#1", None, "chunk id from the document's JSON context ([adapters].chunk_id_key)"),
            ],
        },
        {
            "id": "msg_fx_anthropic_02",
            "note": "locations that do not hold their cited text",
            "messages": [user(*docs_1, q)],
            "content": [
                text(
                    "Card refunds take 5 business days",
                    char(
                        0,
                        REFUNDS,
                        "Refunds to the original card are issued within 5 business days of approval.",
                        "kb-112#3",
                        shift=10,
                    ),
                ),
                text(". "),
                text(
                    "Annual plans are refunded pro rata",
                    {**result_cit(0, PLANS, 0, 1, "kb-200#1", "Plan refunds"), "source": "kb-201#4"},
                ),
                text(". "),
                text(
                    "Refunds are free",
                    {
                        **char(0, REFUNDS, "Refunds to the original card", "kb-777#1"),
                        "document_index": 7,
                        "cited_text": FEES,
                    },
                ),
                text(". "),
                text("A lost gift card can be reissued", blocks_cit(1, GIFT, 1, 2, "kb-301#1", cited=GIFT[0])),
                text("."),
            ],
            "expect": [
                ("location_mismatch", "kb-112#3", "the cited text is at chars 0-", "char range shifted by 10"),
                (
                    "location_mismatch",
                    "kb-200#1",
                    "the citation names source",
                    "search result index and source disagree",
                ),
                ("location_mismatch", "kb-777#1", "document_index 7", "a document the logged request does not hold"),
                ("location_mismatch", "kb-301#1", "blocks 1-2", "block range holds another block's text"),
            ],
        },
        {
            "id": "msg_fx_anthropic_03",
            "note": "locations citegate cannot read: a PDF page, a web search result",
            "messages": [
                user(
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
                        "title": "card-terms.pdf",
                        "citations": {"enabled": True},
                    },
                    text_doc(REFUNDS, title="kb-112#3"),
                    "Are card refunds charged a fee?",
                )
            ],
            "content": [
                text(
                    "The card terms ",
                ),
                text(
                    "charge no refund fee",
                    {
                        "type": "page_location",
                        "cited_text": "No fee is charged for refunds to the original card.",
                        "document_index": 0,
                        "document_title": "card-terms.pdf",
                        "start_page_number": 2,
                        "end_page_number": 3,
                        "file_id": None,
                    },
                ),
                text(", and refunds "),
                text(
                    "arrive within 5 business days",
                    char(
                        1,
                        REFUNDS,
                        "Refunds to the original card are issued within 5 business days of approval.",
                        "kb-112#3",
                    ),
                ),
                text(" ("),
                text(
                    "the help centre says the same",
                    {
                        "type": "web_search_result_location",
                        "cited_text": "Card refunds arrive within 5 business days.",
                        "url": "https://help.example.com/refunds",
                        "title": "Refunds | Help",
                        "encrypted_index": "EpMBCioIBRgCIiQ0NGFhZjI2Yy1mixture",
                    },
                ),
                text(")."),
            ],
            "expect": [
                (
                    "location_mismatch",
                    "card-terms.pdf",
                    "unverifiable: page 2 of document 0",
                    "page_location into a base64 PDF pypdf cannot read (no startxref)",
                ),
                ("ok", "kb-112#3", None, "char_location beside an unreadable PDF (document_index 1)"),
                (
                    "location_mismatch",
                    "https://help.example.com/refunds",
                    "unverifiable: a server-side web search",
                    "web search result",
                ),
            ],
        },
        {
            "id": "msg_fx_anthropic_04",
            "note": "the app cut a document before sending; its retrieval log has the whole text",
            "retrieved": [
                {"chunk_id": "kb-112#3", "rank": 1, "text": REFUNDS_LONG},
                {"chunk_id": "kb-087#1", "rank": 2, "text": CREDIT},
            ],
            "messages": [user(text_doc(REFUNDS_SENT, title="kb-112#3"), text_doc(CREDIT, title="kb-087#1"), q)],
            "content": [
                text(
                    "Card refunds take 5 business days after approval",
                    char(
                        0,
                        REFUNDS_SENT,
                        "Refunds to the original card are issued within 5 business days of approval.",
                        "kb-112#3",
                    ),
                ),
                text("; "),
                text(
                    "bank refunds take up to 10",
                    {
                        **char(0, REFUNDS_LONG, "Refunds to a bank account take up to 10 business days.", "kb-112#3"),
                    },
                ),
                text("."),
            ],
            "expect": [
                ("ok", "kb-112#3", None, "cites the part of a cut document that was sent"),
                (
                    "location_mismatch",
                    "kb-112#3",
                    "outside the document as logged",
                    "cites past the cut: not in the body as logged",
                ),
            ],
        },
        {
            "id": "msg_fx_anthropic_05",
            "note": "no native citations: the answer's own JSON, against the app's retrieval log",
            "retrieved": [
                {"chunk_id": "kb-112#3", "rank": 1, "text": REFUNDS_LONG},
                {"chunk_id": "kb-087#1", "rank": 2, "text": CREDIT},
                {"chunk_id": "kb-200#1", "rank": 3, "text": " ".join(PLANS)},
                {"chunk_id": "kb-555#2", "rank": 4, "text": ORDERS},
            ],
            "messages": [
                user(
                    {**text_doc(REFUNDS_SENT, title="kb-112#3"), "citations": {"enabled": False}},
                    {**text_doc(CREDIT, title="kb-087#1"), "citations": {"enabled": False}},
                    {**search_result(PLANS, "kb-200#1", "Plan refunds"), "citations": {"enabled": False}},
                    "My order A-1 was refunded on 2026-11-01. How long do card refunds take? "
                    'Answer as JSON: {"answer": ..., "citations": [{"chunk_id", "span", "claim"}]}',
                )
            ],
            "content": [
                text(
                    json.dumps(
                        {
                            "answer": "Card refunds take 5 business days.",
                            "citations": [
                                {
                                    "chunk_id": "kb-087#1",
                                    "span": "Store credit is applied immediately",
                                    "claim": "Store credit is immediate.",
                                },
                                {
                                    "chunk_id": "kb-999#1",
                                    "span": "Refunds are instant",
                                    "claim": "Refunds are instant.",
                                },
                                {
                                    "chunk_id": "kb-555#2",
                                    "span": "Orders are refunded as a whole",
                                    "claim": "Orders are refunded whole.",
                                },
                                {
                                    "chunk_id": "kb-112#3",
                                    "span": "Refunds to a bank account take up to 10 business days.",
                                    "claim": "Bank refunds take 10 days.",
                                },
                                {
                                    "chunk_id": "kb-112#3",
                                    "span": "Refunds are instant for premium members",
                                    "claim": "Premium refunds are instant.",
                                },
                                {
                                    "chunk_id": "kb-087#1",
                                    "span": "was refunded on 2026-11-01",
                                    "claim": "Your order was refunded.",
                                },
                                {
                                    "chunk_id": "kb-087#1",
                                    "span": "Annual plans are refunded pro rata",
                                    "claim": "Annual plans are refunded pro rata.",
                                },
                            ],
                        }
                    )
                )
            ],
            "expect": [
                ("ok", "kb-087#1", None, "answer JSON citation in its chunk"),
                ("fabricated_id", "kb-999#1", None, "an id neither retrieved nor sent"),
                ("dropped_before_prompt", "kb-555#2", None, "retrieved, not sent"),
                ("span_truncated", "kb-112#3", None, "the app cut the document before sending"),
                ("span_missing", "kb-112#3", None, "text nowhere in the prompt"),
                ("span_outside_context", "kb-087#1", None, "text only in the user's question"),
                ("span_in_other_chunk", "kb-087#1", None, "text in the search result kb-200#1"),
            ],
        },
        {
            "id": "msg_fx_anthropic_06",
            "note": "no native citations and an answer that is no JSON: an answer reject",
            "messages": [user(text_doc(REFUNDS, title="kb-112#3"), "How long do card refunds take?")],
            "content": [text("Card refunds take about five business days.")],
            "answer_reject": "citations_not_json",
        },
        {
            "id": "msg_fx_anthropic_07",
            "note": "search results in the user turn and in a tool result: search_result_index counts across both",
            "messages": [
                user(search_result((CHARGEBACK,), "kb-640#1", "Chargebacks"), "Can I get my money back from a plan?"),
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me search the plans."},
                        {
                            "type": "tool_use",
                            "id": "toolu_fx_01",
                            "name": "search_kb",
                            "input": {"query": "plan refunds"},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_fx_01",
                            "content": [
                                search_result(PLANS, "kb-200#1", "Plan refunds"),
                                content_doc(GIFT, "kb-301#1"),
                            ],
                        }
                    ],
                },
            ],
            "content": [
                text(
                    "Monthly plans ",
                ),
                text("are not refunded after 14 days", result_cit(1, PLANS, 1, 2, "kb-200#1", "Plan refunds")),
                text(", gift cards "),
                text("are not refundable", blocks_cit(0, GIFT, 0, 1, "kb-301#1")),
                text(", and "),
                text(
                    "chargebacks go through your card issuer",
                    result_cit(0, (CHARGEBACK,), 0, 1, "kb-640#1", "Chargebacks"),
                ),
                text("."),
            ],
            "expect": [
                ("ok", "kb-200#1", None, "search_result_index 1: the first result in a tool result"),
                ("ok", "kb-301#1", None, "a content document in a tool result is document_index 0"),
                ("ok", "kb-640#1", None, "search_result_index 0: the result in the first user turn"),
            ],
        },
        {
            "id": "msg_fx_anthropic_08",
            "note": "the app rewrote its chunks before sending: no retrieved chunk is in the prompt",
            "retrieved": [
                {"chunk_id": "kb-112#3", "rank": 1, "text": "Card refunds: five business days once approved."}
            ],
            "messages": [user(text_doc(REFUNDS, title="kb-112#3"), "How long do card refunds take?")],
            "content": [
                text(
                    "Card refunds take 5 business days",
                    char(
                        0,
                        REFUNDS,
                        "Refunds to the original card are issued within 5 business days of approval.",
                        "kb-112#3",
                    ),
                ),
                text("."),
            ],
            "expect": [
                ("context_not_found", "kb-112#3", None, "a valid location, but the prompt holds no retrieved chunk")
            ],
        },
        {
            "id": "msg_fx_anthropic_09",
            "note": "a two-page PDF document (fpdf2) cited by page_location: checked against its pages' text",
            "messages": [
                user(
                    pdf_doc(card_terms_pdf(), "card-terms.pdf"),
                    text_doc(CREDIT, title="kb-087#1"),
                    "Are card refunds charged a fee, and how are disputes handled?",
                )
            ],
            "content": [
                text(
                    "Card refunds are free",
                    page(
                        "Refunds to the original card are issued within 5 business days of approval, and no fee is "
                        "charged for refunds to the original card.",
                        1,
                    ),
                ),
                text(", "),
                text(
                    "a disputed payment is frozen",
                    page("A card payment disputed with the issuer is frozen until the dispute is closed", 2),
                ),
                text(", "),
                text(
                    "the store answers within ten days",
                    page("the store answers the issuer within 10 business days of being asked.", 1),
                ),
                text(", and "),
                text(
                    "refunds are instant",
                    page("Refunds to the original card are instant.", 1),
                ),
                text("."),
            ],
            "expect": [
                ("ok", "card-terms.pdf", None, "page 1's text, over a line the PDF wraps"),
                ("ok", "card-terms.pdf", None, "page 2's text"),
                ("location_mismatch", "card-terms.pdf", "which is on page 2", "cites page 1, the text is on page 2"),
                ("location_mismatch", "card-terms.pdf", "not in the PDF's text", "cited text the PDF does not hold"),
            ],
        },
        {
            "id": "msg_fx_anthropic_10",
            "note": "an encrypted PDF (fpdf2, owner password): its pages cannot be read, so never a pass",
            "messages": [
                user(
                    pdf_doc(card_terms_pdf(encrypted=True), "card-terms-locked.pdf"),
                    text_doc(REFUNDS, title="kb-112#3"),
                    "Are card refunds charged a fee?",
                )
            ],
            "content": [
                text(
                    "Card refunds are free",
                    page(
                        "no fee is charged for refunds to the original card.",
                        1,
                        title="card-terms-locked.pdf",
                    ),
                ),
                text("."),
            ],
            "expect": [
                (
                    "location_mismatch",
                    "card-terms-locked.pdf",
                    "unverifiable: page 1 of document 0, a PDF citegate cannot read: the PDF is encrypted",
                    "an encrypted PDF",
                ),
            ],
        },
    ]
    return out


class AnthropicServer(CaptureServer):
    def __init__(self) -> None:
        super().__init__()
        self.next: dict | None = None

    def respond(self, path: str, request: dict) -> dict | None:
        if path != "/v1/messages" or self.next is None:
            return None
        body, self.next = self.next, None
        return body


def main() -> None:
    import anthropic  # type: ignore[import-not-found]  # only in .venv-adapters

    server = AnthropicServer()
    client = anthropic.Anthropic(base_url=server.base, api_key="sk-ant-fixture", max_retries=0)
    lines, expected = [], []
    try:
        for n, sc in enumerate(scenarios()):
            server.next = {
                "id": sc["id"],
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": sc["content"],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 900 + n, "output_tokens": 80 + n},
            }
            message = client.messages.create(model=MODEL, max_tokens=1024, system=SYSTEM, messages=sc["messages"])
            path, raw = server.bodies[-1]
            assert path == "/v1/messages", path
            request: object = raw.decode("utf-8") if sc.get("raw_request") else json.loads(raw)
            line = {
                "request": request,
                "response": message.to_dict(mode="json"),
                "logged_at": f"2026-11-06T09:{14 + n:02d}:03.417Z",
                "surface": SURFACE,
            }
            if "retrieved" in sc:
                line["retrieved"] = sc["retrieved"]
            lines.append(json.dumps(line, ensure_ascii=False))
            if "answer_reject" in sc:
                expected.append({"request_id": sc["id"], "answer_reject": sc["answer_reject"], "note": sc["note"]})
            for position, (reason, chunk_id, mismatch, note) in enumerate(sc.get("expect", [])):
                expected.append(
                    {
                        "request_id": sc["id"],
                        "position": position,
                        "chunk_id": chunk_id,
                        "expected_reason": reason,
                        "location_mismatch": mismatch,
                        "note": f"{sc['note']}: {note}",
                    }
                )
            _check_planted(json.loads(raw), sc)
    finally:
        server.shutdown()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "exchanges.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (OUT / "expected.jsonl").write_text("\n".join(json.dumps(e) for e in expected) + "\n", encoding="utf-8")
    print(f"anthropic {md.version('anthropic')}: {len(lines)} exchanges, {len(expected)} expectations -> {OUT}")


def _check_planted(body: dict, sc: dict) -> None:
    """Every char location planted `ok` holds in the text document it names, in the body as sent."""
    docs = [b for m in body["messages"] for b in _blocks(m["content"]) if b.get("type") == "document"]
    cits = [c for block in sc["content"] for c in block.get("citations", [])]
    for c, (reason, *_rest) in zip(cits, sc.get("expect", [])):
        if c["type"] == "char_location" and reason in ("ok", "context_not_found"):
            data = docs[c["document_index"]]["source"]["data"]
            assert data[c["start_char_index"] : c["end_char_index"]] == c["cited_text"], (sc["id"], c)


def _blocks(content: object) -> list[dict]:
    out: list[dict] = []
    for b in content if isinstance(content, list) else []:
        out.append(b)
        if b.get("type") == "tool_result":
            out.extend(_blocks(b.get("content")))
    return out


if __name__ == "__main__":
    main()
