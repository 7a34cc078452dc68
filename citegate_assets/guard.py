"""A guard at the moment of the call: the nightly provenance checks on one prompt, before the answer ships.

    from citegate_assets.guard import check_prompt, check_citations

    report = check_prompt(prompt, retrieved)                     # before sending: did every chunk arrive whole?
    result = check_citations(prompt, retrieved, citations,       # after the answer: is every citation honest?
                             raise_on={"fabricated_id", "span_truncated"})
    result = check_citations(prompt, retrieved, answer=answer)   # an answer with inline markers ("... [1][3].")

The verdicts are the ones `provenance_results` would hold the next night for the same call (same
normalization, same chunk location, same reasons, precedence and offsets): lib/ingest/layout.py holds the
one plain-Python copy of that logic, and tests/test_guard.py keeps it equal to the pipeline.
Imports only the standard library and citegate's pure modules: no dagster, duckdb or polars.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from citegate_assets.lib.config import Config, load_config
from citegate_assets.lib.core.reasons import ASSEMBLY_FAILURES
from citegate_assets.lib.ingest.anchors import passage_section_index
from citegate_assets.lib.ingest.containers import decode_body
from citegate_assets.lib.ingest.layout import (
    OVER_BUDGET,
    Layout,
    block_label,
    prompt_layout,
    provenance_verdict,
    resolve_cited_id,
    spanless_verdict,
)
from citegate_assets.lib.ingest.markers import MarkerRefs, TooManyMarkers, read_markers
from citegate_assets.lib.ingest.normalize_plain import normalize_str
from citegate_assets.lib.ingest.profiles import AUTO, BUILTIN_PROFILES
from citegate_assets.lib.ingest.records import MARKER, Reject, parse_citations, parse_retrieved
from citegate_assets.lib.support.numbers import missing_quantities

__all__ = [
    "ChunkArrival",
    "CitationVerdict",
    "CitationsReport",
    "GuardError",
    "PromptReport",
    "check_citations",
    "check_prompt",
    "to_log_record",
]

ARRIVALS = ("whole", "cut", "pieces", "missing")
REASONS = ("context_not_found", *ASSEMBLY_FAILURES, "ok")  # the guard never sees a native citation's location


class GuardError(ValueError):
    """Raised with raise_on: `failures` lists each failure found (chunk arrivals or citation reasons)."""

    def __init__(self, failures: list[str]):
        self.failures = failures
        super().__init__("citegate guard: " + "; ".join(failures))


@dataclass(frozen=True)
class ChunkArrival:
    """How one retrieved chunk reached the serialized prompt."""

    chunk_id: str
    arrived: str  # whole | cut | pieces | missing
    share: float  # of the chunk's (normalized) text that is in the prompt: 1.0 whole or in full pieces, 0.0 missing
    sections: int  # stretches of the prompt that hold it


@dataclass(frozen=True)
class PromptReport:
    template: str
    context_found: bool  # False: no retrieved chunk (auto) or no context block (a named profile) was found
    chunks: tuple[ChunkArrival, ...]
    normalized_prompt: str = field(repr=False)
    context: tuple[int, int] | None = None  # the context block in normalized_prompt
    status: str = "ok"  # as prompts.profile_status: ok | no_context_block | location_budget_exceeded

    @property
    def failures(self) -> list[str]:
        return self._unchecked() + [
            f"{c.chunk_id}: {c.arrived}" + (f" ({c.share:.0%} arrived)" if c.arrived == "cut" else "")
            for c in self.chunks
            if c.arrived in ("cut", "missing")
        ]

    def _unchecked(self) -> list[str]:
        """Why the prompt could not be checked, if it could not."""
        if self.status == OVER_BUDGET:
            return [f"chunks not located: the search of the prompt hit its work bound (template {self.template})"]
        return [] if self.context_found else [f"no context block found (template {self.template})"]


@dataclass(frozen=True)
class CitationVerdict:
    """One citation, as `provenance_results` (and `numeric_checks`) would record it."""

    position: int
    chunk_id: str  # as the answer gave it
    checked_chunk_id: str  # the chunk checked: a position ("[2]") resolved to the chunk the prompt put there
    reason: str  # ok | context_not_found | fabricated_id | dropped_before_prompt | span_truncated | span_missing | ...
    verdict: str  # present | absent | unverifiable
    found_start: int | None  # where the span is in the normalized prompt
    found_end: int | None
    chunk_share_in_prompt: float | None  # span_truncated: how much of the chunk reached the prompt
    missing_quantities: tuple[str, ...] = ()  # numbers of the claim not in the passage (checked on ok citations)
    origin: str = "structured"  # structured | marker (read from the answer) | native
    cited_as: str | None = None  # a marker as written ("[1-3]"), or a position the answer gave ("[2]")
    claim: str = ""  # normalized
    anchor: tuple[int, int] | None = None  # a span-less citation's anchor in the chunk's retrieved text (normalized)

    @property
    def passes(self) -> bool:
        return self.reason == "ok" and not self.missing_quantities


@dataclass(frozen=True)
class CitationsReport:
    prompt: PromptReport
    citations: tuple[CitationVerdict, ...]

    @property
    def ok(self) -> bool:
        return all(c.passes for c in self.citations)

    @property
    def failures(self) -> list[str]:
        return [
            f"citation {c.position} ({c.chunk_id}): "
            + (c.reason if c.reason != "ok" else "numeric_mismatch " + ", ".join(c.missing_quantities))
            for c in self.citations
            if not c.passes
        ]


def check_prompt(
    prompt: str,
    retrieved: list[dict],
    *,
    encoding: str = "text",
    template: str = AUTO,
    config: Config | str | Path | None = None,
    raise_on: Iterable[str] | None = None,
) -> PromptReport:
    """For each retrieved chunk ({chunk_id, text, rank?}), whether it reached the serialized prompt whole, cut
    (with the share that arrived), in pieces or not at all; and whether a context block was found.

    raise_on: arrivals to fail loudly on, e.g. {"cut", "missing"}; add "no_context" for a prompt whose context
    block was not found. Raises GuardError listing them. A prompt whose chunks could not be located within the
    work bound (status location_budget_exceeded) fails any raise_on. Bad arguments raise ValueError naming the field.
    """
    report, _ = _prompt(prompt, retrieved, encoding, template, config)
    if raise_on:
        wanted = set(raise_on)
        failures = [f"{c.chunk_id}: {c.arrived}" for c in report.chunks if c.arrived in wanted]
        if report.status == OVER_BUDGET or ("no_context" in wanted and not report.context_found):
            failures[:0] = report._unchecked()
        if failures:
            raise GuardError(failures)
    return report


def check_citations(
    prompt: str,
    retrieved: list[dict],
    citations: list[dict] | str | None = None,
    *,
    answer: str | None = None,
    surface: str | None = None,
    encoding: str = "text",
    template: str = AUTO,
    config: Config | str | Path | None = None,
    raise_on: Iterable[str] | None = None,
) -> CitationsReport:
    """One verdict per citation with the gate's reason codes, precedence and offsets, plus the numeric check's
    missing quantities for citations whose provenance is ok. The citations are `citations` ({chunk_id, span,
    claim}; without a span, the claim is anchored in the chunk) or, when none are given, the inline markers of
    `answer` ("... [1][3].", docs/log-format.md; surface: whose `citation_marker` pattern applies, from config).

    raise_on: reasons to fail loudly on, e.g. {"span_truncated", "fabricated_id"}; "numeric_mismatch" counts too.
    A prompt whose chunks could not be located within the work bound fails any raise_on.
    """
    report, layout = _prompt(prompt, retrieved, encoding, template, config)
    if answer is not None and not isinstance(answer, str):
        raise ValueError(f"answer: expected a string, got {type(answer).__name__}")
    parsed = [] if citations is None else parse_citations(citations)
    if isinstance(parsed, Reject):
        raise ValueError(f"citations: {parsed.reason}: {parsed.detail}")
    ids = set(layout.chunk_texts)
    if not parsed and answer:
        parsed = _marker_citations(layout, retrieved, answer, _marker_pattern(config, surface))
    verdicts = []
    for position, c in enumerate(parsed):
        cited_as = c.get("cited_as")
        if c["origin"] == MARKER:
            checked = c["chunk_id"]
        else:
            checked, cited_as = resolve_cited_id(layout, c["chunk_id"], ids)
        claim = normalize_str(c["claim"], layout.unescape)
        span = normalize_str(c["span"], layout.unescape) if c["span"] is not None else None
        if span == "" or not claim:
            raise ValueError(f"citations[{position}]: span or claim is empty after normalization")
        v = (
            provenance_verdict(layout, checked, span, ids)
            if span is not None
            else spanless_verdict(layout, checked, claim, ids)
        )
        missing: tuple[str, ...] = ()
        if v.reason == "ok":
            mine = layout.sections_of(checked)
            at = passage_section_index([(s.body_start, s.body_end) for s in mine], v.found_start)
            if at is not None:
                passage = layout.prompt[mine[at].body_start : mine[at].body_end]
                found = missing_quantities(claim, passage)
                missing = tuple(f"{q.value} {q.unit}" if q.unit else q.value for q in found)
        verdicts.append(
            CitationVerdict(
                position,
                c["chunk_id"] if c["origin"] != MARKER else c["ref"],
                checked,
                v.reason,
                v.verdict,
                v.found_start,
                v.found_end,
                v.chunk_share_in_prompt,
                missing,
                c["origin"],
                cited_as,
                claim,
                v.anchor,
            )
        )
    result = CitationsReport(report, tuple(verdicts))
    if raise_on:
        wanted = set(raise_on)
        failures = [f"citation {c.position} ({c.chunk_id}): {c.reason}" for c in verdicts if c.reason in wanted]
        if report.status == OVER_BUDGET:
            failures[:0] = report._unchecked()
        if "numeric_mismatch" in wanted:
            failures += [
                f"citation {c.position} ({c.chunk_id}): numeric_mismatch {', '.join(c.missing_quantities)}"
                for c in verdicts
                if c.missing_quantities
            ]
        if failures:
            raise GuardError(failures)
    return result


def to_log_record(
    *,
    request_id: str,
    surface: str,
    answer_model: str,
    prompt: str,
    retrieved: list[dict],
    citations: list[dict] | None = None,
    encoding: str = "text",
    template: str | None = None,
    answer: str | None = None,
    logged_at: datetime | None = None,
) -> dict:
    """The citegate-log/1 record of this call: write it as one JSON line to the landing folder, and the nightly
    audit covers the call too. Without citations, the answer's inline markers are read."""
    at = (logged_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    record = {
        "request_id": request_id,
        "logged_at": at.isoformat().replace("+00:00", "Z"),
        "surface": surface,
        "answer_model": answer_model,
        "prompt": prompt,
        "prompt_encoding": encoding,
        "retrieved": [
            {k: v for k, v in r.items() if k in ("chunk_id", "rank", "text", "doc_id", "chunking")} for r in retrieved
        ],
    }
    if citations is not None:
        record["citations"] = citations
    if template is not None:
        record["template"] = template
    if answer is not None:
        record["answer"] = answer
    json.dumps(record)  # fail here, not in the log shipper, on something JSON cannot hold
    return record


def _marker_citations(layout: Layout, retrieved: list[dict], answer: str, pattern: str) -> list[dict]:
    """The answer's marker citations, resolved as ingest resolves them (lib/ingest/citation_rows.py
    _marker_citations)."""
    chunks = parse_retrieved(retrieved)
    assert not isinstance(chunks, Reject)  # _prompt checked them
    in_prompt = {s.chunk_id for s in layout.sections if s.chunk_id is not None}
    absent: dict[str, str] = {}
    for r in chunks:
        if r["chunk_id"] not in in_prompt:
            absent.setdefault(str(r["rank"]), r["chunk_id"])
    refs = MarkerRefs(dict(layout.positions), {r["chunk_id"] for r in chunks}, absent)
    try:
        found = read_markers(
            answer,
            refs,
            pattern=pattern or None,
            chunk_texts=list(layout.chunk_texts.values()),
            normalize=lambda text: normalize_str(text, layout.unescape),
        )
    except TooManyMarkers as exc:
        raise ValueError(f"answer: {exc}") from None
    return [
        {
            "chunk_id": refs.resolve(m.kind, m.ref) or m.ref,
            "ref": m.ref,
            "span": None,
            "claim": m.claim,
            "origin": MARKER,
            "cited_as": m.cited_as,
        }
        for m in found
    ]


def _marker_pattern(config, surface: str | None) -> str:
    if surface is None or config is None:
        return ""
    loaded = config if isinstance(config, Config) else _config(config)
    return loaded.surface(surface).citation_marker


def _prompt(prompt, retrieved, encoding, template, config) -> tuple[PromptReport, Layout]:
    if not isinstance(prompt, str):
        raise ValueError(f"prompt: expected a string, got {type(prompt).__name__}")
    chunks = parse_retrieved(retrieved)
    if isinstance(chunks, Reject):
        raise ValueError(f"retrieved: {chunks.reason}: {chunks.detail}")
    templates = _templates(config)
    if template not in templates and template != AUTO:
        raise ValueError(
            f"template {template!r}: neither built in ({', '.join(BUILTIN_PROFILES)}) nor in the config's [templates]"
        )
    # check_prompt before sending, check_citations after: the same call's layout is computed once
    key = (prompt, encoding, template, id(templates), tuple((c["chunk_id"], c["text"]) for c in chunks))
    layout = _LAYOUTS.get(key)
    if layout is None:
        messages = decode_body(prompt, encoding).messages
        labels = {i: label for i, m in enumerate(messages) if (label := block_label(m.block))}
        layout = prompt_layout([(m.role, m.text) for m in messages], chunks, template, templates, labels)
        with _LAYOUTS_LOCK:  # serving code calls from many threads
            _LAYOUTS[key] = layout
            while len(_LAYOUTS) > _LAYOUT_CACHE_SIZE:
                del _LAYOUTS[next(iter(_LAYOUTS))]
    arrivals = []
    for c in chunks:
        mine = layout.sections_of(c["chunk_id"])
        full = len(layout.chunk_texts[c["chunk_id"]])
        if layout.located is not None:
            arrived = {"whole": "whole", "cut": "cut", "pieces": "pieces", "missing": "missing"}[
                layout.located.found(c["chunk_id"])
            ]
            got = layout.located.arrived_chars.get(c["chunk_id"], 0)
        else:
            arrived = (
                "missing"
                if not mine
                else "cut"
                if all(s.truncated for s in mine)
                else "pieces"
                if len(mine) > 1
                else "whole"
            )
            got = sum(s.body_end - s.body_start for s in mine) if arrived == "cut" else (full if mine else 0)
        arrivals.append(
            ChunkArrival(
                c["chunk_id"], arrived, round(min(1.0, got / full), 4) if full else float(bool(mine)), len(mine)
            )
        )
    report = PromptReport(
        template, layout.status == "ok", tuple(arrivals), layout.prompt, layout.context, layout.status
    )
    return report, layout


_CONFIGS: dict[str, Config] = {}
_LAYOUT_CACHE_SIZE = 32  # calls in flight at once in one process, about
_LAYOUTS: dict[tuple, Layout] = {}
_LAYOUTS_LOCK = threading.Lock()


def _templates(config) -> dict:
    if config is None:
        return BUILTIN_PROFILES
    if isinstance(config, Config):
        return config.templates
    return _config(config).templates


def _config(path) -> Config:
    key = str(path)
    if key not in _CONFIGS:
        _CONFIGS[key] = load_config(key)
    return _CONFIGS[key]
