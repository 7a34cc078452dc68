"""Plain-text rendering of queue entries for reviewers (the `citegate queue` command).

Every value from the logs goes through lib.terminal.safe: control characters are shown, never obeyed."""

from __future__ import annotations

import re
import textwrap

from citegate_assets.lib.core.terminal import ident, quote, safe

WIDTH = 100

PASSAGE_SOURCES = {
    "prompt": "passage as it reached the prompt",
    "retrieved": "passage as retrieved: no section of the prompt holds the cited chunk",
}
NO_PASSAGE = "no passage: the cited chunk is not in the prompt and was never retrieved"
TEXT_REMOVED = "(text removed: [retention] text_days or citegate forget)"  # docs/retention.md


def plural(n: int, one: str, many: str | None = None) -> str:
    """Say "1 entry", "2 entries"."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _clip(text: str | None, n: int) -> str:
    if text is None:
        return "—"
    return text if len(text) <= n else text[: n - 1] + "…"


def _wrap(label: str, text: str | None, n: int = 400) -> str:
    body = textwrap.fill(_clip(None if text is None else safe(text), n), width=WIDTH - 16, subsequent_indent=" " * 16)
    return f"    {label:<12}{body}"


NO_ANCHOR = "none: no sentence of the cited chunk shares a word or number with the claim (the judge decides)"
ANCHOR_CUT = " (cut off: it never reached the prompt)"


def _span_in_passage(e: dict, passage: str) -> tuple[int, int] | None:
    """[start, end) of the span (or a span-less citation's anchor) in the passage: from the offsets when the passage
    is the prompt's section (an anchor over a re-split chunk's pieces ends at the section's end) or the anchor's in
    the retrieved text, else a case-insensitive search of its words (the passage is normalized text, the span as
    logged)."""
    if e.get("passage_source") == "prompt" and e.get("found_start") is not None and e.get("section_start") is not None:
        start, end = e["found_start"] - e["section_start"], e["found_end"] - e["section_start"]
        if e.get("span_given") is False:
            end = min(end, len(passage))
        if 0 <= start <= end <= len(passage):
            return start, end
    if e.get("passage_source") == "retrieved" and e.get("anchor_start") is not None:
        if 0 <= e["anchor_start"] <= e["anchor_end"] <= len(passage):
            return e["anchor_start"], e["anchor_end"]
    words = re.findall(r"\w+", e.get("span") or e.get("anchor") or "")
    for n in dict.fromkeys((len(words), (len(words) + 1) // 2, min(len(words), 3))):  # whole span, then its start
        if n == 0:
            continue
        match = re.search(r"\W+".join(map(re.escape, words[:n])), passage, re.IGNORECASE)
        if match:
            return match.start(), match.end()
    return None


def passage_around_span(e: dict, n: int) -> str | None:
    """At most about n characters of the passage, centred on the span (marked »«) when it is found in it."""
    passage = e.get("passage")
    if passage is None:
        return None
    where = _span_in_passage(e, passage)
    if where is None:
        return _clip(passage, n)
    start, end = where
    if end - start >= n:  # a span longer than the window: its first n characters
        lo, hi = start, start + n
    else:
        lo = max(0, start - (n - (end - start)) // 2)
        hi = min(len(passage), lo + n)
        lo = max(0, hi - n)
    text = passage[lo:start] + "»" + passage[start : min(end, hi)] + ("«" if end <= hi else "") + passage[end:hi]
    return ("…" if lo > 0 else "") + text + ("…" if hi < len(passage) else "")


def render_entry(e: dict, passage_chars: int = 400) -> str:
    prov = f"{e['provenance_verdict']} / {e['provenance_reason']}"
    if e.get("chunk_share_in_prompt") is not None:
        prov += f" ({e['chunk_share_in_prompt']:.0%} of the chunk reached the prompt)"
    if e.get("support_verdict"):
        support = f"{safe(e['support_verdict'])} — {safe(e['judge_model'])} answered {quote(e['judge_raw_answer'])}"
    elif e["provenance_reason"] != "ok":
        support = "not judged (provenance failed first)"
    else:
        support = "not judged (not in the sample for this surface)"
    if e.get("numeric_ok") is None:
        numeric = "not checked"
    elif e["numeric_ok"]:
        numeric = "ok"
    else:
        numeric = "missing in passage: " + ", ".join(safe(q) for q in e.get("missing_quantities") or [])
    evidence = safe(e.get("best_evidence_cause") or "—")
    if e.get("better_chunk_id"):
        evidence += f" → better passage {safe(e['better_chunk_id'])}"
    where = (
        f"offsets {e['found_start']}..{e['found_end']}"
        if e.get("found_start") is not None
        else (
            f"section {e['section_start']}..{e['section_end']}"
            if e.get("section_start") is not None
            else "not in the prompt"
        )
    )
    status = e["status"] + (f" ({e['escalation_cause']})" if e.get("escalation_cause") else "")
    if e.get("reviewed_by"):
        status += f" by {e['reviewed_by']}"
    source = (
        PASSAGE_SOURCES.get(e.get("passage_source") or "", NO_PASSAGE) if e.get("passage") is not None else NO_PASSAGE
    )
    passage = passage_around_span(e, passage_chars)
    cited = f"{safe(e.get('origin') or 'structured')} {quote(e['cited_as'])}; " if e.get("cited_as") else ""
    lines = [
        f"  {ident(e['citation_id'])}  [{safe(status)}]  surface={safe(e['surface'])}  day={e['day']}  "
        f"owner={safe(e['owner'])}",
        _wrap("claim", TEXT_REMOVED if e["claim"] is None else e["claim"]),
        _anchor_line(e)
        if e.get("span_given") is False
        else _wrap("span", TEXT_REMOVED if e["span"] is None else e["span"]),
        f"    {'chunk':<12}{safe(e['chunk_id'])}  ({cited}{source})",
        _wrap("passage", passage, n=10**9),  # already cut around the span
        f"    {'provenance':<12}{prov}",
        f"    {'support':<12}{support}",
        f"    {'numeric':<12}{numeric}",
        f"    {'evidence':<12}{evidence}",
        f"    {'prompt':<12}request {ident(e['request_id'])}  sha256 {safe(e['prompt_sha256'][:16])}…  "
        f"{safe(e['source_file'])}:{e['source_line']}  {where}",
    ]
    return "\n".join(lines)


def _anchor_line(e: dict) -> str:
    """A span-less citation's anchor: the chunk's sentence that best supports the claim (lib/ingest/anchors.py)."""
    if e["claim"] is None:
        return _wrap("anchor", TEXT_REMOVED)
    if e.get("anchor") is None:
        return _wrap("anchor", NO_ANCHOR)
    return _wrap("anchor", e["anchor"] + (ANCHOR_CUT if e["provenance_reason"] == "span_truncated" else ""))


def render_groups(groups: list[dict], entries: list[dict]) -> str:
    """groups: reason, owner(s), entries, open; entries: the rows to show, already limited per group."""
    if not groups:
        return "The queue is empty for this selection."
    by_reason: dict[str, list[dict]] = {}
    for e in entries:
        by_reason.setdefault(e["reason"], []).append(e)
    out = []
    total = sum(g["entries"] for g in groups)
    out.append(f"{plural(total, 'queue entry', 'queue entries')} in {plural(len(groups), 'reason group')}")
    for g in groups:
        out.append("")
        out.append(
            f"== {safe(g['reason'])}  ({plural(g['entries'], 'entry', 'entries')}, {g['open']} open; "
            f"owner: {safe(g['owners'])})"
        )
        shown = by_reason.get(g["reason"], [])
        for e in shown:
            out.append(render_entry(e, passage_chars=240))
        if g["entries"] > len(shown):
            out.append(f"  … {g['entries'] - len(shown)} more (--reason {safe(g['reason'])} --limit N)")
    return "\n".join(out)


def render_context(prompt: str | None, start: int | None, end: int | None, context_chars: int = 300) -> str:
    """The normalized prompt around [start, end), the span marked with »« ."""
    if prompt is None:
        return f"    prompt {TEXT_REMOVED}"
    if start is None or end is None:
        return "(no location in the prompt)"
    lo, hi = max(0, start - context_chars), min(len(prompt), end + context_chars)
    text = ("…" if lo > 0 else "") + safe(prompt[lo:start]) + "»" + safe(prompt[start:end]) + "«" + safe(prompt[end:hi])
    text += "…" if hi < len(prompt) else ""
    return textwrap.fill(text, width=WIDTH, initial_indent="    ", subsequent_indent="    ")


def render_unlocated(entry: dict, profile, chars: int = 600) -> str:
    """For an entry with no place in the prompt (the context block was not found): which profile read the
    prompt, what it looked for, and the start of the prompt, so a reviewer sees why."""
    template, status = entry.get("template"), entry.get("profile_status")
    lines = [
        f"  no location in the prompt: profile {quote(template)} (prompts.template) read it, "
        f"profile_status {safe(status)}"
    ]
    if status == "no_context_block":
        lines.append("  the profile did not find the context block it looks for:")
    elif status == "location_budget_exceeded":
        lines.append("  the chunks were sought by their text and the search hit its work bound (docs/auto.md):")
    elif status == "unknown_template":
        lines.append("  no profile of that name is built in or in [templates]: nothing was looked for")
    if profile is not None:
        for key in ("context_start", "context_end", "chunk_header", "context_message"):
            value = getattr(profile, key, None)
            if value is not None:
                lines.append(f"    {key:<16}{safe(value)}")
    elif status != "unknown_template":
        lines.append("    (the profile is not built in; see [templates] in the config file)")
    prompt = entry.get("prompt_normalized") or ""
    head = safe(_clip(prompt, chars))
    lines.append(f"\n  start of the prompt (normalized, {plural(len(prompt), 'character')}):")
    lines.append(
        textwrap.fill(head, width=WIDTH, initial_indent="    ", subsequent_indent="    ") if head else "    (empty)"
    )
    return "\n".join(lines)
