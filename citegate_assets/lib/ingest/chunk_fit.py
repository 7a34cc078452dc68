"""How each retrieved chunk of a prompt fits its template, for `citegate doctor`: found whole, cut (a prefix reached the
prompt), in pieces, altered (escaped or rewritten) or missing, tallied per (surface, template) with an example of
each misfit."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import polars as pl

from citegate_assets.lib.core.terminal import ident
from citegate_assets.lib.ingest.frames import PROFILE_NO_CONTEXT, PROFILE_OVER_BUDGET, PROFILE_UNKNOWN, Frames
from citegate_assets.lib.ingest.profiles import BUILTIN_PROFILES

EXCERPT_CHARS = 300
# a located chunk whose text stops, then resumes a little further on, was altered there (escaped, rewritten):
RESUME_SKIP = 16  # chunk characters the template may have replaced ("<code>" -> "&lt;code&gt;")
RESUME_GROWTH = 6  # prompt characters per replaced character ('"' -> "&quot;")
RESUME_WINDOW = 8  # and a few more
RESUME_PROBE = 16  # the chunk text that must resume
KINDS = ("no_block", "over_budget", "unknown", "unresolved", "missing", "altered", "cut")
KIND_WORDS = {
    "no_block": "no context block",
    "over_budget": "chunk location over its work bound",
    "unknown": "unknown template",
    "unresolved": "section with no chunk",
    "missing": "retrieved chunk not found",
    "altered": "chunk text altered in the prompt",
    "cut": "chunk cut",
}


@dataclass
class Example:
    request_id: str
    source: str
    line: int
    prompt: str  # the first EXCERPT_CHARS of the normalized prompt
    detail: str = ""


@dataclass
class Fit:
    """The counts of one (surface, template) on its records."""

    surface: str
    template: str
    records: int = 0
    chunks: int = 0  # retrieved chunks
    whole: int = 0
    cut: int = 0
    pieces: int = 0
    altered: int = 0
    missing: int = 0  # every retrieved chunk with no section (also in prompts with no block)
    at_end: int = 0  # of them: dropped from the end of the retrieved list, in a prompt where chunks were found
    unexplained: int = 0  # of them: in a prompt with a context block, not at the end
    block_chunks: int = 0  # retrieved chunks of prompts with a context block
    unresolved: int = 0  # sections whose chunk_id is null
    no_block: int = 0  # prompts with profile_status no_context_block
    over_budget: int = 0  # prompts with profile_status location_budget_exceeded
    unknown: int = 0  # prompts with profile_status unknown_template
    lost: int = 0  # retrieved chunks missing and not at the end, in any prompt
    examples: dict[str, Example] = field(default_factory=dict)
    alternatives: dict[str, Fit] = field(default_factory=dict)  # filled when it does not fit

    @property
    def misfits(self) -> int:
        return self.lost + self.altered + self.unresolved + self.no_block + self.over_budget + self.unknown

    @property
    def fits(self) -> bool:
        return self.misfits == 0

    def add(self, other: Fit) -> None:
        for f in dataclasses.fields(self):
            if f.type == "int":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for kind, ex in other.examples.items():
            self.examples.setdefault(kind, ex)

    def suggestion(self) -> tuple[str | None, list[str]]:
        """(the alternative with the fewest misfits if it beats this one, every alternative that fits)."""
        order = list(BUILTIN_PROFILES)  # auto first
        ranked = sorted(self.alternatives.values(), key=lambda f: (f.misfits, f.cut, f.pieces, order.index(f.template)))
        best = ranked[0] if ranked and ranked[0].misfits < self.misfits else None
        return (best.template if best else None), [f.template for f in ranked if f.fits]

    def verdict(self) -> str:
        if self.fits:
            return "fits"
        best, fitting = self.suggestion()
        why = []
        if self.unknown:
            why.append(
                f"no template named {ident(self.template)} in {self.unknown} of {self.records} prompts "
                "(a built-in, or define [templates.NAME])"
            )
        if self.no_block:
            why.append(f"no context block in {self.no_block} of {self.records} prompts")
        if self.over_budget:
            why.append(
                f"chunks not located within the work bound in {self.over_budget} of {self.records} prompts "
                '(docs/auto.md, "Bounded work")'
            )
        if self.unresolved:
            why.append(f"{self.unresolved} chunk sections name no retrieved chunk")
        if self.altered:
            why.append(
                f"{self.altered} of {self.chunks} retrieved chunks differ from their text in the prompt "
                "(escaped or rewritten)"
            )
        if self.unexplained:
            pct = round(100 * self.unexplained / max(self.block_chunks, 1))
            tail = "if assembly drops them that is real" + (
                f", otherwise try template {best}" if best else "; no built-in finds more of them"
            )
            why.append(f"{pct}% of retrieved chunks not found ({self.unexplained} of {self.block_chunks}) — {tail}")
        text = "does not fit: " + "; ".join(why)
        if self.unexplained and len(why) == 1:
            return text  # the clause says what to try
        if best:
            others = ", ".join(t for t in fitting if t != best)
            text += f" — try template {best}"
            if best in fitting:
                text += f" (fits; so do {others})" if others else " (fits)"
        elif self.alternatives:
            text += " — no built-in fits better: write a profile (docs/profiles.md)"
        return text


def chunk_fits(frames: Frames) -> pl.DataFrame:
    """One row per retrieved chunk: request_id, chunk_id, position, found (whole | cut | pieces | altered | missing)
    and at_end (missing, after every chunk found in its prompt)."""
    prompts = frames.prompts.select("request_id", "prompt_normalized", "profile_status")
    texts = dict(prompts.select("request_id", "prompt_normalized").iter_rows())
    chunk_text = {
        (r, c): t for r, c, t in frames.retrievals.select("request_id", "chunk_id", "text_normalized").iter_rows()
    }
    sections: dict[tuple[str, str], list[tuple]] = {}
    for rid, cid, how, start, end, truncated in (
        frames.sections.filter(pl.col("chunk_id").is_not_null())
        .sort("request_id", "body_start")
        .select("request_id", "chunk_id", "resolved_by", "body_start", "body_end", "truncated")
        .iter_rows()
    ):
        sections.setdefault((rid, cid), []).append((how, start, end, truncated))
    spans: dict[str, list[tuple[str, int, int]]] = {}
    for (rid, cid), secs in sections.items():
        spans.setdefault(rid, []).extend((cid, start, end) for _, start, end, _ in secs)
    found = [
        _found(
            texts.get(rid) or "",
            chunk_text[(rid, cid)],
            sections[(rid, cid)],
            [(s, e) for c, s, e in spans[rid] if c != cid],
        )
        if (rid, cid) in sections
        else "missing"
        for rid, cid in frames.retrievals.select("request_id", "chunk_id").iter_rows()
    ]
    per_chunk = frames.retrievals.select("request_id", "chunk_id", "position").with_columns(
        found=pl.Series(found, dtype=pl.String)
    )
    last_found = (
        per_chunk.filter(pl.col("found") != "missing").group_by("request_id").agg(last_found=pl.col("position").max())
    )
    return (
        per_chunk.join(last_found, on="request_id", how="left")
        .join(prompts.select("request_id", "profile_status"), on="request_id", how="left")
        .with_columns(
            at_end=(pl.col("found") == "missing") & (pl.col("position") > pl.col("last_found")).fill_null(False)
        )
        .select("request_id", "chunk_id", "position", "found", "at_end", "profile_status")
    )


def _found(prompt: str, chunk: str, sections: list[tuple], others: list[tuple[int, int]]) -> str:
    """How one retrieved chunk reached the prompt, from its sections (resolved_by, body_start, body_end, truncated);
    others: the prompt spans of the other chunks' sections."""
    altered = cut = False
    at = 0
    for how, start, end, truncated in sections:
        body = prompt[start:end]
        if how.startswith("auto_"):  # located by content: the body is chunk text; did the template change what follows?
            cfrom = chunk.find(body, at)
            cfrom = chunk.find(body) if cfrom < 0 else cfrom
            at = max(cfrom, 0) + 1
            cto = cfrom + len(body)
            if cfrom >= 0 and cto < len(chunk) and _resumes(prompt, end, chunk, cto, others):
                altered = True
            cut = cut or bool(truncated)
        elif body == chunk or chunk in body:
            continue
        elif chunk.startswith(body):
            cut = True
        else:
            altered = True
    if altered:
        return "altered"
    if cut:
        return "cut"
    return "pieces" if len(sections) > 1 or sections[0][0] == "auto_piece" else "whole"


def _resumes(prompt: str, end: int, chunk: str, cto: int, others: list[tuple[int, int]]) -> bool:
    """The chunk's text goes on a little further, after characters put in place of a few of its own with no
    blank between ("&" -> "&amp;", "<code>" -> "&lt;code&gt;"): the template altered it there. A chunk really
    cut goes on with template text or another chunk's section; a re-split one under a header, which has blanks."""
    for skip in range(RESUME_SKIP + 1):
        probe = chunk[cto + skip : cto + skip + RESUME_PROBE]
        if len(probe.strip()) < 6:
            return False
        at = prompt.find(probe, end, end + RESUME_GROWTH * skip + RESUME_WINDOW + len(probe))
        if (
            at >= 0
            and (at > end or skip > 0)
            and not any(c.isspace() for c in prompt[end:at])
            and not any(s <= at < e for s, e in others)
        ):
            return True
    return False


def tally(frames: Frames, origin: dict[str, tuple[str, int]]) -> dict[tuple[str, str], Fit]:
    """The counts per (surface, template) of one batch's frames; origin: request_id -> (file, line)."""
    out: dict[tuple[str, str], Fit] = {}
    prompts = frames.prompts
    group_of = {rid: (s, t) for rid, s, t in prompts.select("request_id", "surface", "template").iter_rows()}
    excerpt = {rid: text[:EXCERPT_CHARS] for rid, text in prompts.select("request_id", "prompt_normalized").iter_rows()}

    def fit(rid: str) -> Fit:
        key = group_of[rid]
        return out.setdefault(key, Fit(*key))

    def example(f: Fit, kind: str, rid: str, detail: str = "") -> None:
        if kind not in f.examples:
            source, line = origin[rid]
            f.examples[kind] = Example(rid, source, line, excerpt[rid], detail)

    for rid, status in prompts.select("request_id", "profile_status").iter_rows():
        f = fit(rid)
        f.records += 1
        if status == PROFILE_NO_CONTEXT:
            f.no_block += 1
            example(f, "no_block", rid)
        elif status == PROFILE_OVER_BUDGET:
            f.over_budget += 1
            example(f, "over_budget", rid)
        elif status == PROFILE_UNKNOWN:
            f.unknown += 1
            example(f, "unknown", rid)
    for rid, ref in frames.sections.filter(pl.col("chunk_id").is_null()).select("request_id", "header_ref").iter_rows():
        f = fit(rid)
        f.unresolved += 1
        example(f, "unresolved", rid, f"header {ident(ref)}")
    for rid, cid, position, found, at_end, status in chunk_fits(frames).iter_rows():
        f = fit(rid)
        f.chunks += 1
        with_block = status not in (PROFILE_NO_CONTEXT, PROFILE_OVER_BUDGET, PROFILE_UNKNOWN)
        f.block_chunks += with_block
        if found == "missing":
            f.missing += 1
            f.at_end += at_end
            f.lost += not at_end
            if with_block and not at_end:
                f.unexplained += 1
                example(f, "missing", rid, f"chunk {ident(cid)} (retrieved #{position + 1})")
        else:
            setattr(f, found, getattr(f, found) + 1)
            if found in ("altered", "cut"):
                example(f, found, rid, f"chunk {ident(cid)} (retrieved #{position + 1})")
    return out
