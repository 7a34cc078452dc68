"""A batch's citations as rows: those the record gave, cited ids that are a chunk's label or position resolved, the
inline markers of an answer that gave none (lib/ingest/markers.py), each span-less one's anchor
(lib/ingest/anchors.py), and the answer reject rows."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from citegate_assets.lib.ingest.anchors import Stretch, anchor_in_prompt, anchor_sentence
from citegate_assets.lib.ingest.frames import _frame, _unescape_of
from citegate_assets.lib.ingest.layout import positions_of
from citegate_assets.lib.ingest.locate import positional_ref
from citegate_assets.lib.ingest.markers import MarkerRefs, TooManyMarkers, read_markers
from citegate_assets.lib.ingest.normalize import NORMALIZATION_VERSION, normalize
from citegate_assets.lib.ingest.normalize_plain import normalize_str
from citegate_assets.lib.ingest.records import MARKER, Record
from citegate_assets.lib.ingest.settings import IngestSettings as Config


def _answer_reject(rec: Record, reason: str, detail: str, source_file: str, line_no: int, now: datetime) -> tuple:
    return (rec.request_id, rec.day, reason, detail, rec.citations_raw, source_file, line_no, now)


def _citations(rows: list[tuple]) -> tuple[pl.DataFrame, pl.DataFrame]:
    schema = {
        "citation_id": pl.String,
        "request_id": pl.String,
        "day": pl.Date,
        "position": pl.Int32,
        "surface": pl.String,
        "answer_model": pl.String,
        "chunk_id": pl.String,
        "span": pl.String,
        "claim": pl.String,
        "unescape": pl.String,
        "location_mismatch": pl.String,
        "origin": pl.String,
        "cited_as": pl.String,
    }
    df = _frame(rows, schema)
    df = df.with_columns(
        span_normalized=normalize(pl.col("span"), _unescape_of(df)),
        claim_normalized=normalize(pl.col("claim"), _unescape_of(df)),
        normalization_version=pl.lit(NORMALIZATION_VERSION),
        span_given=pl.col("span").is_not_null(),
    ).drop("unescape")
    emptied = df.filter((pl.col("span_normalized") == "") | (pl.col("claim_normalized") == ""))
    return df, emptied


def _resolve_positions(citation_rows: list[tuple], sections: pl.DataFrame, retrievals: pl.DataFrame) -> list[tuple]:
    """A cited id that is no retrieved chunk's id but a label a header or document block gave a chunk (a title),
    or a position ("2", "[2]", "Source 2"), means that chunk: the section whose header says so (else, with no
    numbered headers, the N-th chunk found). Same rules as lib/layout.positions_of, for the guard."""
    retrieved = set(retrievals.select(pl.concat_str("request_id", pl.lit("\x00"), "chunk_id")).to_series().to_list())
    refs: dict[tuple[str, str], str] = {}
    found = sections.filter(pl.col("chunk_id").is_not_null())
    # the rows and each header's position read once (columns to Python, not row by row)
    rows = list(zip(found["request_id"].to_list(), found["header_ref"].to_list(), found["chunk_id"].to_list()))
    keys = [positional_ref(ref) if ref is not None else None for _, ref, _ in rows]
    numbered: set[str] = set()
    for (rid, ref, chunk_id), key in zip(rows, keys):
        if ref is None:
            continue
        if key is None:
            refs.setdefault((rid, ref), chunk_id)
        else:
            numbered.add(rid)
    for (rid, ref, chunk_id), key in zip(rows, keys):
        if rid in numbered and ref is not None and key is not None:
            refs.setdefault((rid, key), chunk_id)
    seen: dict[str, list[str]] = {}
    for rid, _, chunk_id in rows:
        if rid not in numbered and chunk_id not in seen.setdefault(rid, []):
            seen[rid].append(chunk_id)
    for rid, ids in seen.items():
        for n, chunk_id in enumerate(ids, 1):
            refs.setdefault((rid, str(n)), chunk_id)
    out = []
    for row in citation_rows:
        rid, chunk_id = row[1], row[6]
        if f"{rid}\x00{chunk_id}" not in retrieved:
            key = chunk_id if (rid, chunk_id) in refs else positional_ref(chunk_id)
            if key is not None and (rid, key) in refs:
                out.append((*row[:6], refs[(rid, key)], *row[7:], chunk_id))
                continue
        out.append((*row, None))
    return out


def _marker_citations(
    answers: list[tuple[Record, str]], config: Config, sections: pl.DataFrame, retrievals: pl.DataFrame
) -> tuple[list[tuple], dict[str, str]]:
    """The citation rows of the answers that gave no citations: one per (sentence, marker reference) of the answer,
    each resolved to the chunk it names (lib/ingest/markers.py; the guard reads answers the same way); and the answers
    refused, request id -> why (more markers than markers.MAX_MARKERS)."""
    wanted = [rec.request_id for rec, _ in answers]
    mine = sections.filter(pl.col("request_id").is_in(wanted) & pl.col("chunk_id").is_not_null())
    headers: dict[str, list[tuple[str | None, str]]] = {}
    for rid, ref, chunk_id in zip(
        mine["request_id"].to_list(), mine["header_ref"].to_list(), mine["chunk_id"].to_list()
    ):
        headers.setdefault(rid, []).append((ref, chunk_id))
    texts: dict[str, list[str]] = {}
    for rid, text in (
        retrievals.filter(pl.col("request_id").is_in(wanted)).select("request_id", "text_normalized").rows()
    ):
        texts.setdefault(rid, []).append(text)
    rows, refused = [], {}
    for rec, unescape in answers:
        rid = rec.request_id
        refs = marker_refs(headers.get(rid, []), rec.retrieved)
        try:
            found = read_markers(
                rec.answer or "",
                refs,
                pattern=config.surface(rec.surface).citation_marker or None,
                chunk_texts=texts.get(rid, []),
                normalize=lambda text, mode=unescape: normalize_str(text, mode),  # type: ignore[misc]
            )
        except TooManyMarkers as exc:
            refused[rid] = f"answer: {exc}"
            continue
        for position, m in enumerate(found):
            chunk_id = refs.resolve(m.kind, m.ref) or m.ref
            row = (f"{rid}#{position}", rid, rec.day, position, rec.surface, rec.answer_model, chunk_id, None)
            rows.append((*row, m.claim, unescape, None, MARKER, m.cited_as))
    return rows, refused


def marker_refs(headers: list[tuple[str | None, str]], retrieved: list[dict]) -> MarkerRefs:
    """What a call's markers may name. headers: (header_ref, chunk_id) of its sections in prompt order."""
    in_prompt = {chunk_id for _, chunk_id in headers}
    absent: dict[str, str] = {}
    for r in retrieved:
        if r["chunk_id"] not in in_prompt:
            absent.setdefault(str(r["rank"]), r["chunk_id"])
    return MarkerRefs(positions_of(headers), {r["chunk_id"] for r in retrieved}, absent)


ANCHOR_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "citation_id": pl.String,
    "anchor_start": pl.Int32,  # the anchor in the cited chunk's retrieved text (normalized)
    "anchor_end": pl.Int32,
    "anchor_prompt_start": pl.Int32,  # ... and in prompt_normalized, when all of it reached the prompt
    "anchor_prompt_end": pl.Int32,
}


def _anchored(
    citations: pl.DataFrame, sections: pl.DataFrame, retrievals: pl.DataFrame, joined: pl.DataFrame
) -> pl.DataFrame:
    """citations with each span-less one's anchor (lib/ingest/anchors.py): where the claim's best-supporting sentence
    stands in the cited chunk's retrieved text and, when it reached the prompt, in the normalized prompt."""
    spanless = citations.filter(~pl.col("span_given"))
    rows: list[tuple] = []
    if spanless.height:
        wanted = spanless["request_id"].unique().to_list()
        texts = {
            (rid, chunk_id): text
            for rid, chunk_id, text in retrievals.filter(pl.col("request_id").is_in(wanted))
            .select("request_id", "chunk_id", "text_normalized")
            .rows()
        }
        stretches: dict[tuple[str, str], list[Stretch]] = {}
        for rid, chunk_id, start, end, cfrom, cto in (
            sections.filter(pl.col("request_id").is_in(wanted) & pl.col("chunk_id").is_not_null())
            .sort("request_id", "section_no")
            .select("request_id", "chunk_id", "body_start", "body_end", "chunk_from", "chunk_to")
            .rows()
        ):
            stretches.setdefault((rid, chunk_id), []).append(Stretch(start, end, cfrom, cto))
        prompts = dict(joined.filter(pl.col("request_id").is_in(wanted)).rows())
        for cid, rid, chunk_id, claim in spanless.select(
            "citation_id", "request_id", "chunk_id", "claim_normalized"
        ).rows():
            text = texts.get((rid, chunk_id))
            anchor = anchor_sentence(claim, text) if text is not None else None
            if anchor is None:
                continue
            placed = anchor_in_prompt(
                claim, anchor, text or "", prompts.get(rid) or "", stretches.get((rid, chunk_id), [])
            )
            rows.append((cid, *anchor, *(placed or (None, None))))
    return citations.join(_frame(rows, ANCHOR_SCHEMA), on="citation_id", how="left", maintain_order="left")
