"""A batch's prompts as normalized pieces, their chunk sections (by a profile's headers, or sought by content:
template `auto`, lib/ingest/locate.py), and each prompt row assembled with its context block and message bounds."""

from __future__ import annotations

from datetime import datetime
from operator import itemgetter

import polars as pl

from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP
from citegate_assets.lib.ingest.frames import (
    PROFILE_AUTO,
    PROFILE_NO_CONTEXT,
    PROFILE_OK,
    _frame,
    _unescape_of,
)
from citegate_assets.lib.ingest.layout import label_at
from citegate_assets.lib.ingest.locate import locate_chunks
from citegate_assets.lib.ingest.normalize import NORMALIZATION_VERSION, normalize
from citegate_assets.lib.ingest.profiles import BODY, CONTEXT, HEADER


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
        labels = spans.get(rid)
        for n, r in enumerate(found.regions):
            rows.append(
                (
                    rid,
                    day,
                    n,
                    (labels and label_at(labels, r.start)) or r.header_ref,
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
        context = found.context
        if context is not None and rid not in in_block:
            bounds.append((rid, *context))
    return _frame(rows, SECTION_SCHEMA), _frame(bounds, BOUNDS_SCHEMA), over_budget
