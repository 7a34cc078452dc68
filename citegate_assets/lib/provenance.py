"""The provenance gate over the warehouse (README "The provenance gate"; SPEC section 4): SQL in sql/provenance, run
per day range."""

from __future__ import annotations

from datetime import date, datetime

import duckdb

from .timestamps import utc_now
from .warehouse import query, run_script, transaction

# requests are gated in this many hash buckets: bounded memory at 100k prompts a day, negligible cost when small
BUCKETS = 2


def check_provenance(con: duckdb.DuckDBPyConnection, start: date, end: date, *, now: datetime | None = None) -> int:
    """Replace the provenance rows of days [start, end); returns the number of rows written."""
    params = {"start": start, "end": end, "checked_at": now or utc_now(), "buckets": BUCKETS}
    with transaction(con):
        run_script(con, "provenance/delete_days", params)
        for bucket in range(BUCKETS):
            run_script(con, "provenance/provenance_results", {**params, "bucket": bucket})
    [(n,)] = query(con, "provenance/row_count", params).fetchall()
    return n
