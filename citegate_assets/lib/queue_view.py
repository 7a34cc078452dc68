"""Plain-text rendering of queue entries for reviewers (the `citegate queue` command)."""

from __future__ import annotations

import textwrap

WIDTH = 100


def _clip(text: str | None, n: int) -> str:
    if text is None:
        return "—"
    return text if len(text) <= n else text[: n - 1] + "…"


def _wrap(label: str, text: str | None, n: int = 400) -> str:
    body = textwrap.fill(_clip(text, n), width=WIDTH - 16, subsequent_indent=" " * 16)
    return f"    {label:<12}{body}"


def render_entry(e: dict, passage_chars: int = 400) -> str:
    prov = f"{e['provenance_verdict']} / {e['provenance_reason']}"
    if e.get("chunk_share_in_prompt") is not None:
        prov += f" ({e['chunk_share_in_prompt']:.0%} of the chunk reached the prompt)"
    if e.get("support_verdict"):
        support = f"{e['support_verdict']} — {e['judge_model']} answered {e['judge_raw_answer']!r}"
    elif e["provenance_reason"] != "ok":
        support = "not judged (provenance failed first)"
    else:
        support = "not judged (not in the sample for this surface)"
    if e.get("numeric_ok") is None:
        numeric = "not checked"
    elif e["numeric_ok"]:
        numeric = "ok"
    else:
        numeric = "missing in passage: " + ", ".join(e.get("missing_quantities") or [])
    evidence = e.get("best_evidence_cause") or "—"
    if e.get("better_chunk_id"):
        evidence += f" → better passage {e['better_chunk_id']}"
    where = f"offsets {e['found_start']}..{e['found_end']}" if e.get("found_start") is not None else (
        f"section {e['section_start']}..{e['section_end']}" if e.get("section_start") is not None else "not in the prompt"
    )
    status = e["status"] + (f" ({e['escalation_cause']})" if e.get("escalation_cause") else "")
    if e.get("reviewed_by"):
        status += f" by {e['reviewed_by']}"
    lines = [
        f"  {e['citation_id']}  [{status}]  surface={e['surface']}  day={e['day']}  owner={e['owner']}",
        _wrap("claim", e["claim"]),
        _wrap("span", e["span"]),
        f"    {'chunk':<12}{e['chunk_id']}  (passage from {e['passage_source']})",
        _wrap("passage", e.get("passage"), passage_chars),
        f"    {'provenance':<12}{prov}",
        f"    {'support':<12}{support}",
        f"    {'numeric':<12}{numeric}",
        f"    {'evidence':<12}{evidence}",
        f"    {'prompt':<12}request {e['request_id']}  sha256 {e['prompt_sha256'][:16]}…  {e['source_file']}:{e['source_line']}  {where}",
    ]
    return "\n".join(lines)


def render_groups(groups: list[dict], entries: list[dict]) -> str:
    """groups: reason, owner(s), entries, open; entries: the rows to show, already limited per group."""
    if not groups:
        return "The queue is empty for this selection."
    by_reason: dict[str, list[dict]] = {}
    for e in entries:
        by_reason.setdefault(e["reason"], []).append(e)
    out = []
    total = sum(g["entries"] for g in groups)
    out.append(f"{total} queue entries in {len(groups)} reason groups")
    for g in groups:
        out.append("")
        out.append(f"== {g['reason']}  ({g['entries']} entries, {g['open']} open; owner: {g['owners']})")
        shown = by_reason.get(g["reason"], [])
        for e in shown:
            out.append(render_entry(e, passage_chars=240))
        if g["entries"] > len(shown):
            out.append(f"  … {g['entries'] - len(shown)} more (--reason {g['reason']} --limit N)")
    return "\n".join(out)


def render_context(prompt: str, start: int | None, end: int | None, context_chars: int = 300) -> str:
    """The normalized prompt around [start, end), the span marked with »« ."""
    if start is None or end is None:
        return "(no location in the prompt)"
    lo, hi = max(0, start - context_chars), min(len(prompt), end + context_chars)
    text = ("…" if lo > 0 else "") + prompt[lo:start] + "»" + prompt[start:end] + "«" + prompt[end:hi] + ("…" if hi < len(prompt) else "")
    return textwrap.fill(text, width=WIDTH, initial_indent="    ", subsequent_indent="    ")
