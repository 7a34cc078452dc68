"""One request end to end: who served it, what was retrieved and rendered, the question, the citations and
claims of the answer, and its citegate-log/1 record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from random import Random
from typing import Any

from citegate_assets.lib.loggen.citations import CitationBuilder, Cite, draw_claim, draw_reasons
from citegate_assets.lib.loggen.corpus import Corpus, Sentence, new_sentence
from citegate_assets.lib.loggen.rendering import render_logged_prompt
from citegate_assets.lib.loggen.retrieval import Layout, plan_layout
from citegate_assets.lib.loggen.sentences import PASTE_WRAPPERS, QUESTION_OPENERS, QUESTIONS
from citegate_assets.lib.loggen.slots import fill
from citegate_assets.lib.loggen.vocabulary import ANSWER_MODELS, SURFACES, Surface, fold


@dataclass
class Request:
    record: dict[str, Any]
    cites: list[Cite]
    template: str
    encoding: str
    prompt_bytes: int


@dataclass(frozen=True)
class _Call:
    """The logged call: its id and time, and the surface, prompt encoding and model that served it."""

    request_id: str
    logged_at: str
    surface: Surface
    encoding: str
    model: str


def json_line(obj: dict[str, Any]) -> str:
    # keys in insertion order, non-ASCII kept: a line's bytes depend on the record alone
    return json.dumps(obj, ensure_ascii=False)


def _model_for(rng: Random, surface: Surface, encoding: str) -> str:
    # The body shape says who served it: Anthropic bodies are Claude, vLLM reprs are Llama.
    if surface.template == "anthropic-xml" and encoding == "json":
        return "claude-sonnet-4"
    if encoding == "python_repr":
        return "llama-3.3-70b"
    return rng.choice(ANSWER_MODELS)


def _question(rng: Random, topic: str) -> str:
    q = fill(rng, rng.choice(QUESTIONS[topic]))[0]
    if rng.random() < 0.35:
        q = fill(rng, rng.choice(QUESTION_OPENERS))[0] + " " + q
    return q


def _paste(rng: Random, corpus: Corpus, surface: Surface, layout: Layout) -> Sentence:
    for _ in range(20):
        s = new_sentence(rng, surface.topics, corpus.seen)
        if not layout.where(fold(s.text)):
            return s
    return s


def build_request(
    rng: Random, corpus: Corpus, request_id: str, logged_at: str, *, templates_in_records: bool = False
) -> Request:
    """One request and its record; with `templates_in_records`, about half the records name their template."""
    surface = rng.choices(SURFACES, [s.weight for s in SURFACES])[0]
    encoding = rng.choices([e for e, _ in surface.encodings], [w for _, w in surface.encodings])[0]
    call = _Call(request_id, logged_at, surface, encoding, _model_for(rng, surface, encoding))
    topic = rng.choice(surface.topics)
    reasons = draw_reasons(rng)
    layout = plan_layout(rng, corpus, surface, topic, reasons)

    question, pasted = _question(rng, topic), None
    if "span_outside_context" in reasons:
        pasted = _paste(rng, corpus, surface, layout)
        question = rng.choice(PASTE_WRAPPERS).format(s=pasted.text)

    builder = CitationBuilder(rng, corpus, layout, surface.template, question, pasted)
    cites = []
    for reason in reasons:
        # a reason this layout cannot make true falls back to ok (rare: e.g. no cut point found)
        cite = builder.build(reason) or builder.build("ok") or builder.build("fabricated_id")
        if cite is not None:
            cites.append(cite)
    for cite in cites:
        cite.claim_kind, cite.claim = draw_claim(rng, cite, corpus)

    ids = [c.chunk_id for c in layout.rendered]
    prompt = render_logged_prompt(rng, surface, encoding, call.model, ids, layout.bodies, question)
    record = _record(rng, call, prompt, layout, cites, templates_in_records)
    return Request(record, cites, surface.template, encoding, len(prompt.encode("utf-8")))


def _answer(surface: Surface, layout: Layout, cites: list[Cite]) -> str:
    position = {c.chunk_id: i for i, c in enumerate(layout.rendered, 1)}
    parts = []
    for cite in cites:
        marker = cite.chunk_id
        if surface.template == "llamaindex-citation" and cite.chunk_id in position:
            marker = str(position[cite.chunk_id])  # LlamaIndex answers cite by source number
        parts.append(f"{cite.claim.rstrip('.')} [{marker}].")
    return " ".join(parts)


def _record(
    rng: Random, call: _Call, prompt: str, layout: Layout, cites: list[Cite], templates_in_records: bool
) -> dict[str, Any]:
    surface = call.surface
    record: dict[str, Any] = {
        "request_id": call.request_id,
        "logged_at": call.logged_at,
        "surface": surface.name,
        "answer_model": call.model,
    }
    if call.encoding != "text" or rng.random() < 0.7:
        record["prompt_encoding"] = call.encoding
    if rng.random() < 0.5 and templates_in_records:  # drawn either way: the sample stays the same
        record["template"] = surface.template
    record["prompt"] = prompt
    record["retrieved"] = [
        {"chunk_id": c.chunk_id, "rank": rank, "text": c.text, "doc_id": c.doc_id, "chunking": c.chunking}
        for rank, c in enumerate(layout.retrieved, 1)
    ]
    record["answer"] = _answer(surface, layout, cites)
    citations = [{"chunk_id": c.chunk_id, "span": c.span, "claim": c.claim} for c in cites]
    # some loggers store the citations as a JSON string instead of an array
    record["citations"] = json.dumps(citations, ensure_ascii=False) if rng.random() < 0.10 else citations
    return record
