"""The provenance gate over the warehouse (SPEC section 4): SQL in sql/provenance, run per day range."""

from __future__ import annotations

from datetime import date, datetime, timezone

import duckdb

from .warehouse import run_script, transaction

REASONS = (
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
    "ok",
)
# Beyond SPEC's seven: a prompt whose profile found no context block cannot be checked, and is never a pass.
UNVERIFIABLE_REASONS = ("context_not_found",)


# requests are gated in this many hash buckets: bounded memory at 100k prompts a day, negligible cost when small
BUCKETS = 2


def check_provenance(con: duckdb.DuckDBPyConnection, start: date, end: date, *, now: datetime | None = None) -> int:
    """Replace the provenance rows of days [start, end); returns the number of rows written."""
    params = {"start": start, "end": end, "checked_at": now or datetime.now(timezone.utc), "buckets": BUCKETS}
    with transaction(con):
        run_script(con, "provenance/delete_days", params)
        for bucket in range(BUCKETS):
            run_script(con, "provenance/provenance_results", {**params, "bucket": bucket})
    [(n,)] = con.sql(
        "select count(*) from provenance_results where day >= $start and day < $end",
        params={"start": start, "end": end},
    ).fetchall()
    return n
