"""The provenance gate over the warehouse (docs/provenance-gate.md; SPEC section 4): SQL in sql/provenance, run
per day range."""

from __future__ import annotations

from datetime import date, datetime

import duckdb

from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.storage.text_store import streamed_text
from citegate_assets.lib.storage.warehouse import query, run_script, transaction

# requests are gated in this many hash buckets: each holds its citations (not their prompts' text, which streams) and
# reads the days' text again. One: 100,000 requests of 15 KB in 3.6 s and 754 MB (two buckets: 5.1 s, 735 MB)
BUCKETS = 1


def check_provenance(con: duckdb.DuckDBPyConnection, start: date, end: date, *, now: datetime | None = None) -> int:
    """Replace the provenance rows of days [start, end); returns the number of rows written."""
    params = {"start": start, "end": end, "checked_at": now or utc_now(), "buckets": BUCKETS}
    with transaction(con):
        run_script(con, "provenance/delete_days", params)
        with streamed_text(con):  # the prompts' text streamed, not held in a hash table
            for bucket in range(BUCKETS):
                run_script(con, "provenance/provenance_results", {**params, "bucket": bucket})
    [(n,)] = query(con, "provenance/row_count", params).fetchall()
    return n
