"""The passage each provenance-passing citation cites, as it reached the model: the body of the cited prompt section
that holds the found span, normalized. The support gate's inputs (the numeric check, the judge, the agreement check).

The window's prompts are read once, streamed in batches, and the passages are cut from each batch in polars: a join
that carried the prompt text in DuckDB would hold a whole day's prompts in its hash table (1.5 GB at 100,000
requests of 15 KB), which is why it used to run in 8 buckets, each reading every prompt again."""

from __future__ import annotations

from datetime import date

import duckdb
import polars as pl

from citegate_assets.lib.storage.text_store import streamed_text
from citegate_assets.lib.storage.warehouse import query

PROMPTS_PER_BATCH = 2048  # about 30 MB of prompt text per batch at 15 KB a prompt

PASSAGE_SCHEMA = pl.Schema(
    {
        "citation_id": pl.String,
        "request_id": pl.String,
        "day": pl.Date,
        "surface": pl.String,
        "answer_model": pl.String,
        "claim": pl.String,
        "passage": pl.String,
        "selected": pl.Boolean,
    }
)


def cited_passages(
    con: duckdb.DuckDBPyConnection, start: date, end: date, *, selected_only: bool = False
) -> pl.DataFrame:
    """One row per provenance-passing citation of [start, end) (only those the sample selected, with selected_only),
    ordered by citation_id: PASSAGE_SCHEMA. A citation whose prompt text was removed (retention, forget) keeps its
    row with a null passage."""
    params = {"start": start, "end": end}
    bounds = query(con, "support/passage_bounds", {**params, "selected_only": selected_only}).pl()
    if bounds.is_empty():
        return pl.DataFrame(schema=PASSAGE_SCHEMA)
    con.register("cited_requests", bounds.select("request_id").unique().to_arrow())
    try:
        with streamed_text(con):
            reader = query(con, "support/cited_prompts", params).to_arrow_reader(PROMPTS_PER_BATCH)
            try:
                parts = [_cut(bounds, pl.from_arrow(batch)) for batch in reader]  # type: ignore[arg-type]
            finally:
                reader.close()  # the connection takes no other statement while a result is open
    finally:
        con.unregister("cited_requests")
    if not parts:
        return pl.DataFrame(schema=PASSAGE_SCHEMA)
    return pl.concat(parts).sort("citation_id").cast(PASSAGE_SCHEMA)


def _cut(bounds: pl.DataFrame, prompts: pl.DataFrame) -> pl.DataFrame:
    """The batch's citations with their passage, without the prompts' text (dropped batch by batch, not at the end)."""
    return (
        bounds.join(prompts, on="request_id", how="inner")
        .with_columns(
            passage=pl.col("prompt_normalized").str.slice(
                pl.col("body_start"), pl.col("body_end") - pl.col("body_start")
            )
        )
        .select(list(PASSAGE_SCHEMA))
    )


def other_passages(con: duckdb.DuckDBPyConnection, failures: pl.DataFrame, start: date, end: date) -> pl.DataFrame:
    """failures: citation_id, request_id, day, chunk_id, claim (support failures of [start, end), or citations that
    may fail). The other chunks of each one's prompt that reached the context block, with their text as it stood
    there: citation_id, chunk_id, claim, passage (sql/review/other_passages.sql), the prompts' text streamed."""
    con.register("failures", failures.to_arrow())
    try:
        with streamed_text(con):
            return query(con, "review/other_passages", {"start": start, "end": end}).pl()
    finally:
        con.unregister("failures")
