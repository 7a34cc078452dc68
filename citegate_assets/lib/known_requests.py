"""Which of a batch's request ids the prompt log already holds, without reading all of prompt_rows per batch.

Ingest refuses a request id seen before (the prompt log is immutable). Asking the warehouse per batch scans every
request id of history: 0.4 s per 1,000-line batch at 10 million rows, so a night's ingest grew with history. Instead
the 64-bit hashes of history's ids are read once per run into a sorted array (8 bytes a row); a batch's ids are
hashed by the same DuckDB function and looked up in it, and only the ids whose hash is there (a duplicate, or a
collision) are looked up exactly. Ingest holds the warehouse alone, and the run's own ids are its own to track."""

from __future__ import annotations

import duckdb
import polars as pl

from .warehouse import query

HASH = "request_hash"


class KnownRequests:
    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self._history: pl.Series | None = None  # sorted hashes of the ids committed before this run

    def lookup(self, request_ids: list[str]) -> list[tuple[str, str, str, bool]]:
        """(request_id, prompt_sha256, existing source, text removed) of each of these ids the prompt log holds."""
        if not request_ids:
            return []
        keys = pl.DataFrame({"request_id": request_ids}, schema={"request_id": pl.String})
        self.con.register("batch_keys", keys.to_arrow())
        try:
            hashed = query(self.con, "ingest/batch_key_hashes").pl()
        finally:
            self.con.unregister("batch_keys")
        candidates = hashed.filter(_found(hashed[HASH], self._sorted_history()))["request_id"]
        if candidates.is_empty():
            return []
        self.con.register("batch_keys", candidates.to_frame().to_arrow())
        try:
            return [tuple(row) for row in query(self.con, "ingest/existing_requests").fetchall()]
        finally:
            self.con.unregister("batch_keys")

    def _sorted_history(self) -> pl.Series:
        if self._history is None:
            frame = query(self.con, "ingest/request_hashes").pl()
            self._history = frame[HASH].sort()
        return self._history


def _found(values: pl.Series, sorted_history: pl.Series) -> pl.Series:
    """Whether each value is in sorted_history: a binary search per value, not a hash set of all history."""
    if sorted_history.is_empty():
        return pl.Series([False] * values.len(), dtype=pl.Boolean)
    at = sorted_history.search_sorted(values).clip(0, sorted_history.len() - 1)
    return sorted_history.gather(at) == values
