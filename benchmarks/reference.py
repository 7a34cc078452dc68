"""The seed's reference provenance check, made verdict-compatible: for every citation, decode and
normalize the whole prompt again, then search. What the vectorized gate is measured against."""

from __future__ import annotations

from citegate_assets.lib.ingest.containers import decode_prompt
from citegate_assets.lib.ingest.normalize import normalize_texts
from citegate_assets.lib.ingest.profiles import BODY, CONTEXT, HEADER, split_prompt


def reference_reason(prompt: str, encoding: str, profile, retrieved: dict[str, str], chunk_id: str, span: str) -> str:
    """One citation, from scratch: the cost the design avoids (N over the whole prompt per citation)."""
    pieces, found = split_prompt(decode_prompt(prompt, encoding), profile)
    texts = normalize_texts([p.text for p in pieces] + [span] + list(retrieved.values()), profile.unescape)
    n_pieces = len(pieces)
    norm_pieces, norm_span, norm_chunks = texts[:n_pieces], texts[n_pieces], dict(zip(retrieved, texts[n_pieces + 1 :]))
    if not found:
        return "context_not_found"
    prompt_n = " ".join(t for t in norm_pieces if t)
    context = " ".join(t for p, t in zip(pieces, norm_pieces) if t and p.kind in (CONTEXT, HEADER, BODY))
    bodies = _bodies(pieces, norm_pieces, profile, norm_chunks, retrieved)
    cited = bodies.get(chunk_id)
    if cited is None:
        return "fabricated_id" if chunk_id not in retrieved else "dropped_before_prompt"
    full = norm_chunks.get(chunk_id)
    truncated = all(full is not None and len(b) < len(full) and full.startswith(b) for b in cited)
    if not any(norm_span in b for b in cited) and truncated and full is not None and norm_span in full:
        return "span_truncated"
    if norm_span not in prompt_n:
        return "span_missing"
    if norm_span not in context:
        return "span_outside_context"
    if not any(norm_span in b for b in cited):
        return "span_in_other_chunk"
    return "ok"


def _bodies(pieces, norm_pieces, profile, norm_chunks, retrieved) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    ids = list(retrieved)
    for p, text in zip(pieces, norm_pieces):
        if p.kind != BODY:
            continue
        if profile.chunk_ref == "chunk_id":
            chunk = p.ref
        elif profile.chunk_ref == "position":
            idx = int(p.ref) - 1 if p.ref and p.ref.isdigit() else -1
            chunk = ids[idx] if 0 <= idx < len(ids) else None
        else:  # content: exact, then prefix, then piece
            chunk = next((c for c, t in norm_chunks.items() if t == text), None)
            chunk = chunk or next((c for c, t in norm_chunks.items() if text and t.startswith(text)), None)
            chunk = chunk or next((c for c, t in norm_chunks.items() if text and text in t), None)
        if chunk is not None:
            out.setdefault(chunk, []).append(text)
    return out
