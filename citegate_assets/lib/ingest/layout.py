"""One prompt's layout in plain Python: its normalized text, its context block and the section of each chunk,
and the provenance reason of a citation — what ingest (lib/ingest/batch.py, vectorized) and the gate
(sql/provenance/provenance_results.sql) decide, for one call at a time on the serving path (guard.py).

No polars, duckdb or dagster. tests/test_guard.py holds this equal to the pipeline, reason and offsets,
on the demo logs and on prompts rendered by the real frameworks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from citegate_assets.lib.ingest.anchors import Stretch, anchor_in_prompt, anchor_sentence
from citegate_assets.lib.ingest.locate import Located, locate_chunks, positional_ref
from citegate_assets.lib.ingest.normalize_plain import normalize_str
from citegate_assets.lib.ingest.profiles import AUTO, BODY, CONTEXT, HEADER, OUTSIDE, Piece, Profile, split_prompt

HTML_ENTITIES_IN_PROMPTS = ("&amp;", "&lt;", "&gt;", "&quot;", "&#39;", "&#x27;")
_ENTITY = re.compile("|".join(re.escape(e) for e in HTML_ENTITIES_IN_PROMPTS))
OK, NO_CONTEXT, UNKNOWN = "ok", "no_context_block", "unknown_template"
OVER_BUDGET = "location_budget_exceeded"  # the chunks were sought by content and the search hit its bound


def auto_unescape(messages: list[tuple[str, str]], retrieved: list[dict]) -> str:
    """html when the prompt holds HTML entities that no chunk text holds itself (a template escaped them)."""
    if not any(_ENTITY.search(text) for _, text in messages):  # one pass over the prompt, the usual answer
        return "none"
    used = [e for e in HTML_ENTITIES_IN_PROMPTS if any(e in text for _, text in messages)]
    return "none" if any(e in r["text"] for r in retrieved for e in used) else "html"


def block_label(block) -> str | None:
    """The id a document block carries for citing it: a search result's source (what Anthropic's citations
    of it name), else its title; a document's title, else its context, else its source."""
    if block is None:
        return None
    order = (
        (block.source, block.title, block.context)
        if block.kind == "search_result"
        else (block.title, block.context, block.source)
    )
    for value in order:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def uses_block_search(profile: Profile, pieces: list[Piece], found: bool) -> bool:
    """Headers that carry no id (LlamaIndex "Source N:") or none at all (LangChain's "{page_content}"):
    the profile gives the block and the chunks are found in it by content."""
    return found and (profile.chunk_ref == "content" or not any(p.kind == HEADER for p in pieces))


@dataclass(frozen=True)
class Section:
    section_no: int
    header_ref: str | None
    chunk_id: str | None
    resolved_by: str | None
    body_start: int
    body_end: int
    chunk_chars: int | None
    truncated: bool
    chunk_from: int | None = None  # the chunk's text [chunk_from, chunk_to) the body holds, when known
    chunk_to: int | None = None


@dataclass
class Layout:
    template: str
    status: str  # ok | no_context_block | unknown_template | location_budget_exceeded
    unescape: str
    prompt: str  # normalized, pieces joined by one space
    context: tuple[int, int] | None
    sections: list[Section] = field(default_factory=list)
    chunk_texts: dict[str, str] = field(default_factory=dict)  # retrieved chunk id -> normalized text
    positions: dict[str, str] = field(default_factory=dict)  # "2" -> the chunk an answer's [2] means
    located: Located | None = None

    def sections_of(self, chunk_id: str) -> list[Section]:
        return [s for s in self.sections if s.chunk_id == chunk_id]


def prompt_layout(
    messages: list[tuple[str, str]],
    retrieved: list[dict],
    template: str,
    templates: dict[str, Profile],
    labels: dict[int, str] | None = None,
) -> Layout:
    """retrieved: [{chunk_id, text, ...}] in logged order (chunk ids stripped, as ingest keeps them);
    labels: message number -> the id its document block carries (block_label), for `auto`."""
    profile = templates.get(template)
    if template == AUTO:
        unescape = auto_unescape(messages, retrieved)
        pieces = [Piece(i, OUTSIDE, text) for i, (_, text) in enumerate(messages)]
        status, block_search = OK, False
    elif profile is None:
        unescape = "none"
        pieces = [Piece(i, OUTSIDE, text) for i, (_, text) in enumerate(messages)]
        status, block_search = UNKNOWN, False
    else:
        unescape = profile.unescape
        pieces, found = split_prompt(messages, profile, retrieved)
        status = OK if found else NO_CONTEXT
        block_search = uses_block_search(profile, pieces, found)
        if block_search:
            pieces = [Piece(p.message_no, CONTEXT, p.text) if p.kind in (HEADER, BODY) else p for p in pieces]
    texts, starts, ends, at = [], [], [], 0
    for p in pieces:
        t = normalize_str(p.text, unescape)
        texts.append(t)
        starts.append(at)
        ends.append(at + len(t))
        at += len(t) + (1 if t else 0)
    prompt = " ".join(t for t in texts if t)
    chunk_texts = {r["chunk_id"]: normalize_str(r["text"], unescape) for r in retrieved}
    in_block = [(s, e) for p, s, e in zip(pieces, starts, ends) if p.kind in (CONTEXT, HEADER, BODY) and e > s]
    context = (min(s for s, _ in in_block), max(e for _, e in in_block)) if in_block else None
    layout = Layout(template, status, unescape, prompt, context, chunk_texts=chunk_texts)
    ordered = [(r["chunk_id"], chunk_texts[r["chunk_id"]]) for r in retrieved]
    if template == AUTO or block_search:
        if template == AUTO:
            located = locate_chunks(prompt, ordered)
            layout.context = located.context
            layout.status = OK if located.context is not None else NO_CONTEXT
        elif context is None:
            return layout  # an empty block: its chunks were all dropped
        else:
            located = locate_chunks(prompt, ordered, *context)
        layout.located = located
        if located.over_budget:  # nothing located: every citation is unverifiable (context_not_found)
            layout.status = OVER_BUDGET
        spans = (
            [(s, e, labels.get(i)) for i, (s, e) in enumerate(zip(starts, ends))] if template == AUTO and labels else []
        )
        layout.sections = [
            Section(
                n,
                label_at(spans, r.start) or r.header_ref,
                r.chunk_id,
                f"auto_{r.how}",
                r.start,
                r.end,
                located.chunk_chars[r.chunk_id],
                r.chunk_id in located.truncated,
                r.chunk_from,
                r.chunk_to,
            )
            for n, r in enumerate(located.regions)
        ]
    elif profile is not None:
        layout.sections = _profile_sections(pieces, texts, starts, ends, profile, unescape, retrieved, chunk_texts)
    layout.positions = positions_of([(s.header_ref, s.chunk_id) for s in layout.sections if s.chunk_id is not None])
    return layout


def _profile_sections(
    pieces, texts, starts, ends, profile: Profile, unescape: str, retrieved, chunk_texts
) -> list[Section]:
    out = []
    ids = [r["chunk_id"] for r in retrieved]
    for p, text, start, end in zip(pieces, texts, starts, ends):
        if p.kind != BODY:
            continue
        ref = normalize_str(p.ref, unescape) if p.ref is not None else None
        chunk_id: str | None
        how: str | None
        if profile.chunk_ref == "chunk_id":
            chunk_id, how = ref, "chunk_id"
        else:  # position
            index = int(ref) - 1 if ref is not None and ref.lstrip("+-").isdigit() else None
            chunk_id = ids[index] if index is not None and 0 <= index < len(ids) else None
            how = "position" if chunk_id is not None else None
        full = chunk_texts.get(chunk_id) if chunk_id is not None else None
        prefix = full is not None and full.startswith(text)
        truncated = prefix and len(text) < len(full)  # type: ignore[arg-type]
        out.append(
            Section(
                p.section_no,
                ref,
                chunk_id,
                how,
                start,
                end,
                len(full) if full is not None else None,
                truncated,
                0 if prefix else None,
                len(text) if prefix else None,
            )
        )
    return out


def label_at(spans: list[tuple[int, int, str | None]], at: int) -> str | None:
    """The label of the message (start, end, label) that holds offset `at`."""
    return next((label for s, e, label in spans if s <= at < e), None)


def positions_of(headers: list[tuple[str | None, str]]) -> dict[str, str]:
    """What a cited id that is no retrieved id names, as ingest resolves it: a header's label (a document
    block's title), a header's number, else the N-th chunk found. headers: (header_ref, chunk_id) of the sections
    that carry a chunk, in prompt order."""
    named = headers
    refs: dict[str, str] = {}
    for header_ref, chunk_id in named:
        if header_ref is not None and positional_ref(header_ref) is None:
            refs.setdefault(header_ref, chunk_id)
    if any(header_ref is not None and positional_ref(header_ref) is not None for header_ref, _ in named):
        for header_ref, chunk_id in named:
            key = positional_ref(header_ref) if header_ref is not None else None
            if key is not None:
                refs.setdefault(key, chunk_id)
    else:
        seen: list[str] = []
        for _, chunk_id in named:
            if chunk_id not in seen:
                seen.append(chunk_id)
        for n, chunk_id in enumerate(seen, 1):
            refs.setdefault(str(n), chunk_id)
    return refs


def resolve_cited_id(layout: Layout, cited: str, retrieved_ids: set[str]) -> tuple[str, str | None]:
    """(the chunk id to check, the id as the answer gave it if that was a position)."""
    if cited in retrieved_ids:
        return cited, None
    if cited in layout.positions:  # a label a header or document block gave the chunk
        return layout.positions[cited], cited
    key = positional_ref(cited)
    if key is not None and key in layout.positions:
        return layout.positions[key], cited
    return cited, None


@dataclass(frozen=True)
class Verdict:
    reason: str
    verdict: str  # present | absent | unverifiable
    found_start: int | None
    found_end: int | None
    chunk_share_in_prompt: float | None
    anchor: tuple[int, int] | None = None  # a span-less citation's anchor in the chunk's retrieved text (normalized)


def provenance_verdict(layout: Layout, chunk_id: str, span: str, retrieved_ids: set[str]) -> Verdict:
    """The gate's decision for one citation (chunk_id already resolved, span normalized like the prompt)."""
    prompt, n = layout.prompt, len(span)
    p1 = prompt.find(span) if n else 0  # strpos of '' is 1 in SQL
    mine = layout.sections_of(chunk_id)
    truncated = bool(mine) and all(s.truncated for s in mine)
    fast_ok = any(p1 >= s.body_start and p1 + n <= s.body_end for s in mine) if p1 >= 0 else False
    cs, ce = layout.context or (0, 0)
    reason, found = None, None
    if layout.status != OK:
        reason = "context_not_found"
    elif not mine:
        reason = "fabricated_id" if chunk_id not in retrieved_ids else "dropped_before_prompt"
    elif n == 0:
        reason = "span_missing"
    elif fast_ok:
        reason, found = "ok", p1
    else:
        hits = [s.body_start + i for s in mine if (i := prompt[s.body_start : s.body_end].find(span)) >= 0]
        context_hit = prompt[cs:ce].find(span)
        in_chunk = span in layout.chunk_texts.get(chunk_id, "") if chunk_id in layout.chunk_texts else False
        if hits:
            reason, found = "ok", min(hits)
        elif truncated and in_chunk:
            reason = "span_truncated"
        elif p1 < 0:
            reason = "span_missing"
        elif context_hit < 0:
            reason, found = "span_outside_context", p1
        else:
            reason, found = "span_in_other_chunk", cs + context_hit
    share = None
    if reason == "span_truncated":
        chars = max((s.chunk_chars or 0) for s in mine)
        share = max(s.body_end - s.body_start for s in mine) / chars if chars else None
    verdict = "present" if reason == "ok" else "unverifiable" if reason == "context_not_found" else "absent"
    return Verdict(reason, verdict, found, None if found is None else found + n, share)


def spanless_verdict(layout: Layout, chunk_id: str, claim: str, retrieved_ids: set[str]) -> Verdict:
    """The gate's decision for a citation without a span (chunk_id resolved, claim normalized like the prompt): the
    id tests, then span_truncated when the claim's anchor sentence lies in the part of a cut chunk that never reached
    the prompt, else ok (placed at the anchor, if any). Ingest anchors with the same functions
    (lib/ingest/anchors.py)."""
    mine = layout.sections_of(chunk_id)
    text = layout.chunk_texts.get(chunk_id)
    anchor = anchor_sentence(claim, text) if text is not None else None
    placed = None
    if anchor is not None and text is not None:
        stretches = [Stretch(s.body_start, s.body_end, s.chunk_from, s.chunk_to) for s in mine]
        placed = anchor_in_prompt(claim, anchor, text, layout.prompt, stretches)
    truncated = bool(mine) and all(s.truncated for s in mine)
    if layout.status != OK:
        reason = "context_not_found"
    elif not mine:
        reason = "fabricated_id" if chunk_id not in retrieved_ids else "dropped_before_prompt"
    elif anchor is not None and placed is None and truncated:
        reason = "span_truncated"
    else:
        reason = "ok"
    share = None
    if reason == "span_truncated":
        chars = max((s.chunk_chars or 0) for s in mine)
        share = max(s.body_end - s.body_start for s in mine) / chars if chars else None
    found = placed if reason == "ok" else None
    verdict = "present" if reason == "ok" else "unverifiable" if reason == "context_not_found" else "absent"
    return Verdict(reason, verdict, found[0] if found else None, found[1] if found else None, share, anchor)
