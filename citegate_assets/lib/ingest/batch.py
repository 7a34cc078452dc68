"""One batch of validated records → the frames the ingest tables hold (vectorized with polars).

Each prompt is normalized once here, piece by piece: a piece keeps its structural role (outside the
context block, template text inside it, a chunk header, a chunk body). The normalized prompt is the
non-empty normalized pieces joined by one space, so every section boundary is a token boundary and
the offsets of the context block and of every chunk body fall out of a cumulative sum. The parts are built in
lib/ingest/retrievals.py, lib/ingest/prompt_sections.py and lib/ingest/citation_rows.py.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP
from citegate_assets.lib.ingest.citation_rows import (
    _anchored,
    _answer_reject,
    _citations,
    _marker_citations,
    _resolve_positions,
)
from citegate_assets.lib.ingest.containers import Message, PromptDecodeError, decode_body
from citegate_assets.lib.ingest.frames import (
    PROFILE_AUTO,
    PROFILE_NO_CONTEXT,
    PROFILE_OK,
    PROFILE_OVER_BUDGET,
    PROFILE_UNKNOWN,
    Frames,
    _frame,
)
from citegate_assets.lib.ingest.layout import auto_unescape, block_label, uses_block_search
from citegate_assets.lib.ingest.profiles import AUTO, BODY, CONTEXT, HEADER, Piece, split_prompt
from citegate_assets.lib.ingest.prompt_sections import (
    CHUNK_RANGE,
    _assemble_prompts,
    _joined,
    _locate_auto,
    _normalized_pieces,
    _sections,
)
from citegate_assets.lib.ingest.records import Record, Reject
from citegate_assets.lib.ingest.retrievals import RETRIEVAL_COLUMNS, TextForms, _raw_span, _retrievals
from citegate_assets.lib.ingest.settings import IngestSettings as Config

Refused = tuple[int, Record, Reject]  # (key, record, why): a valid record the batch could not take


def template_of(rec: Record, config: Config) -> str:
    """The record's own template, else its surface's."""
    return rec.template or config.surface(rec.surface).template


def decode_prompts(items: list[tuple[int, Record]]) -> tuple[dict[int, list[Message]], list[Refused]]:
    """Each record's prompt decoded to its messages, by key; the records whose prompt cannot be read."""
    decoded: dict[int, list[Message]] = {}
    refused: list[Refused] = []
    for key, rec in items:
        try:
            decoded[key] = decode_body(rec.prompt, rec.prompt_encoding).messages
        except PromptDecodeError as exc:
            refused.append((key, rec, Reject("prompt_undecodable", str(exc))))
    return decoded, refused


def frames_of_records(
    items: list[tuple[int, Record]], config: Config, origin: dict[int, tuple[str, int]], now: datetime
) -> tuple[Frames, list[Refused]]:
    """Decode, then build the frames as the ingest does; the frames and the records refused on the way."""
    decoded, undecodable = decode_prompts(items)
    readable = [(key, rec) for key, rec in items if key in decoded]
    frames, broken = build_frames_isolating_failures(readable, config, origin, now, decoded)
    return frames, undecodable + broken


def build_frames_isolating_failures(
    items: list[tuple[int, Record]],
    config: Config,
    origin: dict[int, tuple[str, int]],
    now: datetime,
    decoded: dict[int, list[Message]],
) -> tuple[Frames, list[Refused]]:
    """build_frames on the batch; if it raises, find the records that make it raise and leave them out."""
    try:
        return build_frames(items, config, origin, now, decoded), []
    except Exception:  # noqa: BLE001 — isolate, then report each culprit as a refused record
        good, broken = [], []
        for key, rec in items:
            try:
                build_frames([(key, rec)], config, origin, now, decoded)
                good.append((key, rec))
            except Exception as exc:  # noqa: BLE001
                broken.append((key, rec, Reject("unprocessable_record", f"{type(exc).__name__}: {exc}"[:500])))
        return build_frames(good, config, origin, now, decoded), broken


def build_frames(
    items: list[tuple[int, Record]],
    config: Config,
    origin: dict[int, tuple[str, int]],
    now: datetime,
    decoded: dict[int, list[Message]],
) -> Frames:
    """items: (key, record) for every valid record of the batch, in file order; origin: key -> (file, line);
    decoded: their messages by key (decode_prompts)."""
    prompt_rows: list[tuple] = []
    piece_rows: list[tuple] = []
    retrieval_rows: list[tuple] = []
    chunk_texts: dict[str, TextForms] = {}  # each distinct text once, with what _raw_span needs of it
    citation_rows: list[tuple] = []
    answer_reject_rows: list[tuple] = []
    in_block: set[str] = set()  # requests whose chunks are sought by content inside their profile's block
    block_labels: dict[str, dict[int, str]] = {}  # auto: message number -> the id its document block carries
    marker_answers: list[tuple[Record, str]] = []  # (record, unescape): no citations given, the answer's markers
    for key, rec in items:
        source_file, line_no = origin[key]
        template = template_of(rec, config)
        profile = config.profile(template)
        decoded_messages = decoded[key]
        messages = [(m.role, m.text) for m in decoded_messages]
        pieces: list[tuple[int, str, str, int | None, str | None, str]]
        if template == AUTO:
            # no pattern: each message is one piece; the chunks are found by content once normalized
            status, unescape = PROFILE_AUTO, auto_unescape(messages, rec.retrieved)
            labels = {i: label for i, m in enumerate(decoded_messages) if (label := block_label(m.block))}
            if labels:
                block_labels[rec.request_id] = labels
            pieces = [(i, role, "outside", None, None, text) for i, (role, text) in enumerate(messages)]
        elif profile is None:
            status, unescape = PROFILE_UNKNOWN, "none"
            pieces = [(i, role, "outside", None, None, text) for i, (role, text) in enumerate(messages)]
        else:
            split, found = split_prompt(messages, profile, rec.retrieved)
            status, unescape = (PROFILE_OK if found else PROFILE_NO_CONTEXT), profile.unescape
            if uses_block_search(profile, split, found):
                in_block.add(rec.request_id)
                split = [Piece(p.message_no, CONTEXT, p.text) if p.kind in (HEADER, BODY) else p for p in split]
            pieces = [(p.message_no, messages[p.message_no][0], p.kind, p.section_no, p.ref, p.text) for p in split]
        rid, day = rec.request_id, rec.day  # day: a property, computed once per record rather than per row
        for piece_no, (message_no, role, kind, section_no, ref, text) in enumerate(pieces):
            piece_rows.append((rid, piece_no, message_no, role, kind, section_no, ref, text, unescape))
        prompt_rows.append(
            (  # in PROMPT_SCHEMA's order
                rid,
                day,
                rec.logged_at,
                rec.surface,
                rec.answer_model,
                template,
                rec.prompt_encoding,
                rec.prompt,
                None,  # prompt_sha256, once the prompt column holds the prompts
                status,
                profile.chunk_ref if profile else None,
                rec.answer,
                source_file,
                line_no,
                unescape,
                rec.prompt_reconstructed,
                rec.retrieved_left_out,
            )
        )
        newline, ascii_prompt = "\n" in rec.prompt, rec.prompt.isascii()
        after = 0  # where the previous chunk's raw span ends: the next one is sought from there first
        for position, r in enumerate(rec.retrieved):
            forms = chunk_texts.get(r["text"])
            if forms is None:
                forms = chunk_texts[r["text"]] = TextForms(r["text"])
            text = forms.text
            span = _raw_span(rec.prompt, forms, newline, ascii_prompt, after)  # in characters, as DuckDB's substr
            after = span[1] if span[1] is not None else after
            retrieval_rows.append(
                (
                    rid,
                    day,
                    r["chunk_id"],
                    r["rank"],
                    position,
                    r["doc_id"],
                    r["chunking"],
                    text,
                    unescape,
                    r.get("text_source"),
                    *span,
                )
            )
        if status == PROFILE_UNKNOWN:
            answer_reject_rows.append(
                _answer_reject(
                    rec,
                    "unknown_template",
                    f"template {template!r} is neither built in nor in [templates]",
                    source_file,
                    line_no,
                    now,
                )
            )
        elif rec.answer_reject is not None:
            answer_reject_rows.append(
                _answer_reject(rec, rec.answer_reject.reason, rec.answer_reject.detail, source_file, line_no, now)
            )
        elif not rec.citations:
            if rec.answer and rec.answer.strip():
                marker_answers.append((rec, unescape))
        else:
            for position, c in enumerate(rec.citations):
                citation_rows.append(
                    (
                        f"{rid}#{position}",
                        rid,
                        day,
                        position,
                        rec.surface,
                        rec.answer_model,
                        c["chunk_id"],
                        c["span"],
                        c["claim"],
                        unescape,
                        c.get("location_mismatch"),
                        c["origin"],
                    )
                )

    prompts = _frame(prompt_rows, PROMPT_SCHEMA)
    # each prompt's UTF-8 is kept on its string by the column just built: the hash encodes it by copying
    prompts = prompts.with_columns(prompt_sha256=pl.Series([rec.prompt_sha256 for _, rec in items], dtype=pl.String))
    normalized = _normalized_pieces(piece_rows)
    retrievals = _retrievals(retrieval_rows)
    joined = _joined(normalized)
    sections = _sections(normalized, retrievals, prompts)
    located, bounds, over_budget = _locate_auto(prompts, joined, retrievals, normalized, in_block, block_labels)
    sections = pl.concat([sections, located]).sort("request_id", "section_no") if located.height else sections
    prompts = _assemble_prompts(prompts, normalized, joined, sections, bounds, now)
    if over_budget:  # not located at all: every citation of the prompt is unverifiable (context_not_found)
        prompts = prompts.with_columns(
            profile_status=pl.when(pl.col("request_id").is_in(list(over_budget)))
            .then(pl.lit(PROFILE_OVER_BUDGET))
            .otherwise(pl.col("profile_status"))
        )
    citation_rows = _resolve_positions(citation_rows, sections, retrievals)
    if marker_answers:
        marker_rows, refused = _marker_citations(marker_answers, config, sections, retrievals)
        citation_rows += marker_rows
        for key, rec in items:
            if rec.request_id in refused:
                source_file, line_no = origin[key]
                answer_reject_rows.append(
                    _answer_reject(rec, "too_many_markers", refused[rec.request_id], source_file, line_no, now)
                )
    retrievals = (
        retrievals.join(
            sections.filter(pl.col("chunk_id").is_not_null())
            .select("request_id", "chunk_id")
            .unique()
            .with_columns(in_prompt=pl.lit(True)),
            on=["request_id", "chunk_id"],
            how="left",
        )
        .with_columns(pl.col("in_prompt").fill_null(False))
        .drop("unescape")
    )
    citations, emptied = _citations(citation_rows)
    citations = _anchored(citations, sections, retrievals, joined)
    if emptied.height:
        # a span or claim that normalizes to nothing would match everywhere: reject the whole answer
        bad = set(emptied["request_id"].to_list())
        citations = citations.filter(~pl.col("request_id").is_in(list(bad)))
        for key, rec in items:
            source_file, line_no = origin[key]
            if rec.request_id in bad:
                answer_reject_rows.append(
                    _answer_reject(
                        rec,
                        "citation_empty_field",
                        "a span or claim is empty after normalization",
                        source_file,
                        line_no,
                        now,
                    )
                )
    answer_rejects = _frame(answer_reject_rows, ANSWER_REJECT_SCHEMA)
    return Frames(prompts, sections.drop(CHUNK_RANGE), retrievals.select(RETRIEVAL_COLUMNS), citations, answer_rejects)


PROMPT_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "request_id": pl.String,
    "day": pl.Date,
    "logged_at": UTC_TIMESTAMP,
    "surface": pl.String,
    "answer_model": pl.String,
    "template": pl.String,
    "prompt_encoding": pl.String,
    "prompt_raw": pl.String,
    "prompt_sha256": pl.String,
    "profile_status": pl.String,
    "chunk_ref": pl.String,
    "answer": pl.String,
    "source_file": pl.String,
    "source_line": pl.Int64,
    "unescape": pl.String,
    "prompt_reconstructed": pl.Boolean,
    "retrieved_left_out": pl.String,
}
ANSWER_REJECT_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "request_id": pl.String,
    "day": pl.Date,
    "reason": pl.String,
    "detail": pl.String,
    "raw_field": pl.String,
    "source_file": pl.String,
    "source_line": pl.Int64,
    "rejected_at": UTC_TIMESTAMP,
}
