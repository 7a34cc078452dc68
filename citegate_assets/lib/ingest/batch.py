"""One batch of validated records → the frames the ingest tables hold (vectorized with polars).

Each prompt is normalized once here, piece by piece: a piece keeps its structural role (outside the
context block, template text inside it, a chunk header, a chunk body). The normalized prompt is the
non-empty normalized pieces joined by one space, so every section boundary is a token boundary and
the offsets of the context block and of every chunk body fall out of a cumulative sum.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter

import polars as pl

from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP
from citegate_assets.lib.ingest.anchors import Stretch, anchor_in_prompt, anchor_sentence
from citegate_assets.lib.ingest.containers import Message, PromptDecodeError, decode_body
from citegate_assets.lib.ingest.layout import auto_unescape, block_label, label_at, positions_of, uses_block_search
from citegate_assets.lib.ingest.locate import find_text, locate_chunks, positional_ref
from citegate_assets.lib.ingest.markers import MarkerRefs, TooManyMarkers, read_markers
from citegate_assets.lib.ingest.normalize import NORMALIZATION_VERSION, normalize
from citegate_assets.lib.ingest.normalize_plain import normalize_str
from citegate_assets.lib.ingest.profiles import AUTO, BODY, CONTEXT, HEADER, Piece, split_prompt
from citegate_assets.lib.ingest.records import MARKER, Record, Reject
from citegate_assets.lib.ingest.settings import IngestSettings as Config


@dataclass
class Frames:
    prompts: pl.DataFrame
    sections: pl.DataFrame
    retrievals: pl.DataFrame
    citations: pl.DataFrame
    answer_rejects: pl.DataFrame


Refused = tuple[int, Record, Reject]  # (key, record, why): a valid record the batch could not take
PROFILE_OK, PROFILE_NO_CONTEXT, PROFILE_UNKNOWN = "ok", "no_context_block", "unknown_template"
PROFILE_OVER_BUDGET = "location_budget_exceeded"  # the chunks were sought by content and the search hit its bound
PROFILE_AUTO = "auto"  # while building: decided once the chunks are sought (ok or no_context_block)


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
    chunk_texts: dict[str, str] = {}
    escaped: dict[str, tuple[str, ...]] = {}  # _raw_span: the JSON forms of each distinct text
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
                rec.prompt_sha256,
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
        for position, r in enumerate(rec.retrieved):
            # one object per distinct text: polars then encodes a chunk that many requests retrieved once
            text = chunk_texts.setdefault(r["text"], r["text"])
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
                    *_raw_span(
                        rec.prompt, text, newline, ascii_prompt, escaped
                    ),  # in characters, as DuckDB's substr counts
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
RETRIEVAL_COLUMNS = [
    "request_id",
    "day",
    "chunk_id",
    "rank",
    "position",
    "doc_id",
    "chunking",
    "text",
    "text_normalized",
    "in_prompt",
    "text_source",
    "raw_start",  # where the text as logged stands in prompt_raw (stored only by retrievals_stored_once)
    "raw_end",
    "raw_encoding",
]
RAW_SPAN = ["raw_start", "raw_end", "raw_encoding"]


# Schema 9: a retrieved text's normalized form is stored once. Where it equals the body of the first prompt section
# holding that chunk (most chunks reach the prompt whole), retrievals.text_normalized is null and
# [prompt_start, prompt_end) locates it in prompts.prompt_normalized. Schema 11: the same for the text as logged,
# where it stands verbatim in prompts.prompt_raw (a plain-text prompt): retrievals.text is null and
# [raw_start, raw_end) locates it. Schema 13: also where it stands there as the body of a JSON string (a prompt
# logged as JSON chat messages escapes it), raw_encoding 'json'. False writes both twice, as schema 8 did (the
# tests' reference for what readers must get back).
STORE_RETRIEVED_TEXT_ONCE = True


def retrievals_stored_once(frames: Frames) -> pl.DataFrame:
    """frames.retrievals as stored: text_normalized null, with prompt_start/prompt_end, where the first section
    resolving to the chunk holds exactly that text (readers: coalesce with the substring of prompt_normalized);
    text null, with raw_start/raw_end, where the text as logged stands in prompt_raw, verbatim or (raw_encoding
    'json') JSON-escaped (readers: coalesce with that substring of prompt_raw, decoded by json_extract_string when
    escaped; docs/warehouse.md, "retrievals"). Offsets count characters, as DuckDB's substr does."""
    first = (
        frames.sections.filter(pl.col("chunk_id").is_not_null())
        .sort("request_id", "section_no")
        .unique(["request_id", "chunk_id"], keep="first", maintain_order=True)
        .select("request_id", "chunk_id", prompt_start="body_start", prompt_end="body_end")
    )
    bodies = first.join(frames.prompts.select("request_id", "prompt_normalized"), on="request_id").select(
        "request_id",
        "chunk_id",
        "prompt_start",
        "prompt_end",
        body=pl.col("prompt_normalized").str.slice(
            pl.col("prompt_start"), pl.col("prompt_end") - pl.col("prompt_start")
        ),
    )
    same = pl.col("body").is_not_null() & (pl.col("body") == pl.col("text_normalized"))
    return (
        frames.retrievals.join(bodies, on=["request_id", "chunk_id"], how="left", maintain_order="left")
        .with_columns(
            text_normalized=pl.when(same).then(None).otherwise(pl.col("text_normalized")),
            prompt_start=pl.when(same).then(pl.col("prompt_start")),
            prompt_end=pl.when(same).then(pl.col("prompt_end")),
            text=pl.when(pl.col("raw_start").is_not_null()).then(None).otherwise(pl.col("text")),
        )
        .drop("body")
    )


def stored_twice(frames: Frames) -> pl.DataFrame:
    """frames.retrievals with every text stored (schema 8's layout, the tests' reference): no raw span."""
    return frames.retrievals.with_columns(pl.lit(None, pl.Int32).alias(c) for c in RAW_SPAN[:2]).with_columns(
        raw_encoding=pl.lit(None, pl.String)
    )


def _frame(rows: list[tuple], schema: Mapping[str, pl.DataType | type[pl.DataType]]) -> pl.DataFrame:
    """Rows in the schema's order, built column by column: about twice as fast as orient="row" on long strings."""
    if not rows:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(
        [pl.Series(name, column, dtype=dtype) for (name, dtype), column in zip(schema.items(), zip(*rows))]
    )


NOWHERE = (None, None, None)


def _json_forms(text: str) -> tuple[str, ...]:
    """The text as the body of a JSON string, as json.dumps writes it without and with ensure_ascii (they differ on
    non-ASCII text and on DEL, which only the latter escapes; the SDKs' HTTP clients write the first), each form
    once and only where it differs from the text (the verbatim search has answered for that one)."""
    forms = []
    for ensure_ascii in (False, True):
        body = json.dumps(text, ensure_ascii=ensure_ascii)[1:-1]
        if body != text and body not in forms:
            forms.append(body)
    return tuple(forms)


def _raw_span(
    prompt: str, text: str, newline: bool, ascii_prompt: bool, escaped: dict[str, tuple[str, ...]]
) -> tuple[int | None, int | None, str | None]:
    """(raw_start, raw_end, raw_encoding): where text stands in the prompt as logged, verbatim (encoding None) or
    as the body of a JSON string ('json': a prompt logged as JSON chat messages escapes quotes, backslashes, line
    breaks and often every non-ASCII character); NOWHERE when it does not. A python_repr prompt's escaping depends
    on the quote its repr chose, which DuckDB cannot undo: such a text stays stored (NOWHERE). escaped: the batch's
    JSON forms of each distinct text (a chunk many requests retrieved is escaped once)."""
    if not text or "\x00" in text:  # a NUL: json_extract_string would not give it back
        return NOWHERE
    if (newline or "\n" not in text) and (not ascii_prompt or text.isascii()):
        at = find_text(prompt, text)
        if at >= 0:
            return at, at + len(text), None
    forms = escaped.get(text)
    if forms is None:
        forms = escaped[text] = _json_forms(text)
    for body in forms:
        if ascii_prompt and not body.isascii():
            continue
        at = find_text(prompt, body)
        if at >= 0:
            return at, at + len(body), "json"
    return NOWHERE
    ascii_text = text.isascii()
    if (newline or "\n" not in text) and (ascii_text or not ascii_prompt):
        at = find_text(prompt, text)
        if at >= 0:
            return at, at + len(text), None
    seen = {text}  # a form equal to the text was searched for verbatim above
    for ensure_ascii in (True, False):  # they differ on non-ASCII text and on DEL (escaped only by the first)
        body = json.dumps(text, ensure_ascii=ensure_ascii)[1:-1]
        if body in seen or (ascii_prompt and not body.isascii()):
            continue
        seen.add(body)
        at = find_text(prompt, body)
        if at >= 0:
            return at, at + len(body), "json"
    return NOWHERE


def _unescape_of(df: pl.DataFrame) -> pl.Expr | str:
    """The frame's unescape column, or its one mode when every row has it (the usual batch): then N runs that mode
    alone instead of computing both and choosing per row."""
    modes = df["unescape"].unique().to_list()
    return modes[0] if len(modes) == 1 and modes[0] in ("none", "html") else pl.col("unescape")


def _answer_reject(rec: Record, reason: str, detail: str, source_file: str, line_no: int, now: datetime) -> tuple:
    return (rec.request_id, rec.day, reason, detail, rec.citations_raw, source_file, line_no, now)


def _normalized_pieces(rows: list[tuple]) -> pl.DataFrame:
    schema = {
        "request_id": pl.String,
        "piece_no": pl.Int32,
        "message_no": pl.Int32,
        "role": pl.String,
        "kind": pl.String,
        "section_no": pl.Int32,
        "ref": pl.String,
        "text": pl.String,
        "unescape": pl.String,
    }
    df = _frame(rows, schema)
    length = pl.col("text").str.len_chars().cast(pl.Int64)
    # each non-empty piece is followed by one joining space (the last one's is never written)
    step = length + (length > 0).cast(pl.Int64)
    return (
        df.with_columns(
            text=normalize(pl.col("text"), _unescape_of(df)), ref=normalize(pl.col("ref"), _unescape_of(df))
        )
        .with_columns(length=length)
        .with_columns(end_cum=step.cum_sum().over("request_id"))
        .with_columns(start=pl.col("end_cum") - step)
        .with_columns(end=pl.col("start") + pl.col("length"))
        .drop("end_cum")
    )


def _retrievals(rows: list[tuple]) -> pl.DataFrame:
    schema = {
        "request_id": pl.String,
        "day": pl.Date,
        "chunk_id": pl.String,
        "rank": pl.Int32,
        "position": pl.Int32,
        "doc_id": pl.String,
        "chunking": pl.String,
        "text": pl.String,
        "unescape": pl.String,
        "text_source": pl.String,
        "raw_start": pl.Int32,  # where the text as logged stands in prompt_raw: _raw_span
        "raw_end": pl.Int32,
        "raw_encoding": pl.String,
    }
    df = _frame(rows, schema)
    return df.with_columns(text_normalized=normalize(pl.col("text"), _unescape_of(df)))


def _sections(pieces: pl.DataFrame, retrievals: pl.DataFrame, prompts: pl.DataFrame) -> pl.DataFrame:
    """One row per chunk section in a context block, resolved to the retrieved chunk it carries."""
    bodies = pieces.filter(pl.col("kind") == BODY).select(
        "request_id", "section_no", "ref", body=pl.col("text"), body_start=pl.col("start"), body_end=pl.col("end")
    )
    modes = prompts.select("request_id", "chunk_ref", "day")
    bodies = bodies.join(modes, on="request_id", how="left")
    ret = retrievals.select("request_id", "chunk_id", "position", "text_normalized")

    by_id = bodies.filter(pl.col("chunk_ref") == "chunk_id").with_columns(
        chunk_id=pl.col("ref"), resolved_by=pl.lit("chunk_id")
    )
    by_position = (
        bodies.filter(pl.col("chunk_ref") == "position")
        .with_columns(position=pl.col("ref").cast(pl.Int32, strict=False) - 1)
        .join(ret.select("request_id", "position", "chunk_id"), on=["request_id", "position"], how="left")
        .with_columns(resolved_by=pl.when(pl.col("chunk_id").is_not_null()).then(pl.lit("position")))
        .drop("position")
    )
    sections = pl.concat(
        [
            f.select(
                "request_id", "day", "section_no", "ref", "chunk_id", "resolved_by", "body", "body_start", "body_end"
            )
            for f in (by_id, by_position)
        ]
    )
    full = ret.select("request_id", "chunk_id", chunk_text=pl.col("text_normalized"))
    body_len = pl.col("body").str.len_chars()
    return (
        sections.join(full, on=["request_id", "chunk_id"], how="left")
        .with_columns(
            chunk_chars=pl.col("chunk_text").str.len_chars().cast(pl.Int32),
            # a body that is a strict prefix of its chunk's text was cut by a token budget
            truncated=pl.col("chunk_text").is_not_null()
            & (body_len < pl.col("chunk_text").str.len_chars())
            & pl.col("chunk_text").str.starts_with(pl.col("body")),
            # the chunk's text the body holds, when it is the text or a prefix of it (an anchor maps through it)
            prefix=pl.col("chunk_text").is_not_null() & pl.col("chunk_text").str.starts_with(pl.col("body")),
        )
        .select(
            "request_id",
            "day",
            pl.col("section_no").cast(pl.Int32),
            header_ref=pl.col("ref"),
            chunk_id="chunk_id",
            resolved_by="resolved_by",
            body_start=pl.col("body_start").cast(pl.Int32),
            body_end=pl.col("body_end").cast(pl.Int32),
            chunk_chars="chunk_chars",
            truncated="truncated",
            chunk_from=pl.when(pl.col("prefix")).then(pl.lit(0, pl.Int32)),
            chunk_to=pl.when(pl.col("prefix")).then(body_len.cast(pl.Int32)),
        )
        .sort("request_id", "section_no")
    )


def _joined(pieces: pl.DataFrame) -> pl.DataFrame:
    """request_id -> prompt_normalized: the non-empty normalized pieces joined by one space."""
    non_empty = pieces.filter(pl.col("length") > 0)
    return non_empty.group_by("request_id", maintain_order=True).agg(prompt_normalized=pl.col("text").str.join(" "))


def _assemble_prompts(
    prompts: pl.DataFrame,
    pieces: pl.DataFrame,
    joined: pl.DataFrame,
    sections: pl.DataFrame,
    located_bounds: pl.DataFrame,
    now: datetime,
) -> pl.DataFrame:
    in_block = pieces.filter(pl.col("kind").is_in([CONTEXT, HEADER, BODY]) & (pl.col("length") > 0))
    context = pl.concat(
        [
            in_block.group_by("request_id").agg(
                context_start=pl.col("start").min().cast(pl.Int32), context_end=pl.col("end").max().cast(pl.Int32)
            ),
            located_bounds,
        ]
    )
    bounds = (
        pieces.group_by("request_id", "message_no", maintain_order=True)
        .agg(role=pl.col("role").first(), start=pl.col("start").min(), end=pl.col("end").max())
        .group_by("request_id", maintain_order=True)
        .agg(message_bounds=pl.struct("role", "start", "end"))
    )
    counts = sections.group_by("request_id").agg(n_sections=pl.len().cast(pl.Int32))
    return (
        prompts.join(joined, on="request_id", how="left")
        .join(context, on="request_id", how="left")
        .join(bounds, on="request_id", how="left")
        .join(counts, on="request_id", how="left")
        .with_columns(
            # auto: the block is where the chunks were found; none found is no context block (never blamed on assembly)
            profile_status=pl.when(pl.col("profile_status") == PROFILE_AUTO)
            .then(
                pl.when(pl.col("context_start").is_not_null())
                .then(pl.lit(PROFILE_OK))
                .otherwise(pl.lit(PROFILE_NO_CONTEXT))
            )
            .otherwise(pl.col("profile_status")),
            prompt_normalized=pl.col("prompt_normalized").fill_null(""),
            n_sections=pl.col("n_sections").fill_null(0),
            normalization_version=pl.lit(NORMALIZATION_VERSION),
            ingested_at=pl.lit(now, dtype=UTC_TIMESTAMP),
        )
        .drop("unescape", "chunk_ref")
    )


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


SECTION_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "request_id": pl.String,
    "day": pl.Date,
    "section_no": pl.Int32,
    "header_ref": pl.String,
    "chunk_id": pl.String,
    "resolved_by": pl.String,
    "body_start": pl.Int32,
    "body_end": pl.Int32,
    "chunk_chars": pl.Int32,
    "truncated": pl.Boolean,
    "chunk_from": pl.Int32,  # the chunk's text [chunk_from, chunk_to) the body holds (not stored: anchors use it)
    "chunk_to": pl.Int32,
}
CHUNK_RANGE = ["chunk_from", "chunk_to"]
BOUNDS_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "request_id": pl.String,
    "context_start": pl.Int32,
    "context_end": pl.Int32,
}


def _locate_auto(
    prompts: pl.DataFrame,
    joined: pl.DataFrame,
    retrievals: pl.DataFrame,
    pieces: pl.DataFrame,
    in_block: set[str],
    block_labels: dict[str, dict[int, str]],
) -> tuple[pl.DataFrame, pl.DataFrame, set[str]]:
    """Each retrieved chunk sought by content: in the whole prompt (template auto; the chunks found make the
    block, returned as bounds) or inside the block a profile found (`in_block`). The regions are the sections;
    the requests whose search hit its work bound (locate.work_budget) have none."""
    auto = (
        prompts.select("request_id", "day", "profile_status")
        .filter((pl.col("profile_status") == PROFILE_AUTO) | pl.col("request_id").is_in(list(in_block)))
        .select("request_id", "day")
    )
    if auto.is_empty():
        return pl.DataFrame(schema=SECTION_SCHEMA), pl.DataFrame(schema=BOUNDS_SCHEMA), set()
    blocks = (
        dict(
            (
                (rid, (lo, hi))
                for rid, lo, hi in pieces.filter(
                    pl.col("request_id").is_in(list(in_block)) & (pl.col("kind") == CONTEXT) & (pl.col("length") > 0)
                )
                .group_by("request_id")
                .agg(pl.col("start").min(), pl.col("end").max())
                .iter_rows()
            )
        )
        if in_block
        else {}
    )
    # whole columns to Python (to_list), neither joined nor row by row: the texts are most of the batch's bytes
    wanted = set(auto["request_id"].to_list())
    if len(wanted) < prompts.height:
        joined = joined.filter(pl.col("request_id").is_in(wanted))
        retrievals = retrievals.filter(pl.col("request_id").is_in(wanted))
    texts = dict(zip(joined["request_id"].to_list(), joined["prompt_normalized"].to_list()))
    # each distinct chunk text converted once (retrieved chunks repeat across a batch's requests)
    distinct = retrievals["text_normalized"].unique(maintain_order=True).to_frame().with_row_index("text_no")
    text_nos = retrievals.select("text_normalized").join(
        distinct, on="text_normalized", how="left", nulls_equal=True, maintain_order="left"
    )["text_no"]
    distinct_texts = distinct["text_normalized"].to_list()
    by_request: dict[str, list[tuple[int, str, str]]] = {}
    for rid, position, chunk_id, text_no in zip(
        retrievals["request_id"].to_list(),
        retrievals["position"].to_list(),
        retrievals["chunk_id"].to_list(),
        text_nos.to_list(),
    ):
        if rid in wanted:
            by_request.setdefault(rid, []).append((position, chunk_id, distinct_texts[text_no]))
    # in retrieved order (a stable sort: the rows are already in it unless a request id came twice)
    chunks = {rid: [(c, t) for _, c, t in sorted(rows, key=itemgetter(0))] for rid, rows in by_request.items()}
    spans: dict[str, list] = {}  # a labelled prompt's messages: (start, end, label)
    if block_labels:
        for rid, message_no, start, end in (
            pieces.filter(pl.col("request_id").is_in(list(block_labels)))
            .select("request_id", "message_no", "start", "end")
            .iter_rows()
        ):
            spans.setdefault(rid, []).append((start, end, block_labels[rid].get(message_no)))
    rows, bounds, over_budget = [], [], set()
    for rid, day in auto.iter_rows():
        text = texts.get(rid) or ""
        if rid in in_block:
            if rid not in blocks:
                continue  # an empty block: its chunks were all dropped
            found = locate_chunks(text, chunks.get(rid, []), *blocks[rid])
        else:
            found = locate_chunks(text, chunks.get(rid, []))
        if found.over_budget:
            over_budget.add(rid)
        for n, r in enumerate(found.regions):
            rows.append(
                (
                    rid,
                    day,
                    n,
                    label_at(spans.get(rid, []), r.start) or r.header_ref,
                    r.chunk_id,
                    f"auto_{r.how}",
                    r.start,
                    r.end,
                    found.chunk_chars[r.chunk_id],
                    r.chunk_id in found.truncated,
                    r.chunk_from,
                    r.chunk_to,
                )
            )
        if found.context is not None and rid not in in_block:
            bounds.append((rid, *found.context))
    return _frame(rows, SECTION_SCHEMA), _frame(bounds, BOUNDS_SCHEMA), over_budget


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
