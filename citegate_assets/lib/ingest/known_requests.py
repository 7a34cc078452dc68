"""Which of a batch's request ids the prompt log already holds, without reading all of prompt_rows per batch.

Ingest refuses a request id seen before (the prompt log is immutable). Asking the warehouse per batch scans every
request id of history: 0.4 s per 1,000-line batch at 10 million rows, so a night's ingest grew with history. Instead
the 64-bit hashes of history's ids and their days are read once per run and sorted (12 bytes a row); a batch's ids
are hashed by the same DuckDB function and looked up in them, and only the ids whose hash is there (a duplicate, or
a collision) are looked up exactly, on the days of those hashes (the scan skips the row groups of other days).
Ingest holds the warehouse alone, and the run's own ids are its own to track."""

from __future__ import annotations

import duckdb
import polars as pl

from citegate_assets.lib.storage.warehouse import query

HASH = "request_hash"


class KnownRequests:
    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con
        self._history: pl.DataFrame | None = None  # request_hash, day of the ids committed before this run, by hash

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
        candidates = _on_days(hashed, self._sorted_history())
        if candidates.is_empty():
            return []
        self.con.register("batch_keys", candidates.to_arrow())
        try:
            return [tuple(row) for row in query(self.con, "ingest/existing_requests").fetchall()]
        finally:
            self.con.unregister("batch_keys")

    def forgotten(self, request_ids: list[str]) -> set[str]:
        """Which of these ids `citegate forget` removed (a handful at most: read exactly)."""
        if not request_ids:
            return set()
        return {rid for (rid,) in query(self.con, "ingest/forgotten_ids", {"ids": sorted(set(request_ids))}).fetchall()}

    def _sorted_history(self) -> pl.DataFrame:
        if self._history is None:
            self._history = query(self.con, "ingest/request_hashes").pl()  # sorted by the hash
        return self._history


def _on_days(hashed: pl.DataFrame, history: pl.DataFrame) -> pl.DataFrame:
    """(request_id, day) for each id whose hash history holds, once per day a row with that hash has (a binary search
    per id, not a hash set of all history; two rows share a hash only by a collision)."""
    if history.is_empty() or hashed.is_empty():
        return pl.DataFrame(schema={"request_id": pl.String, "day": pl.Date})
    hashes = history[HASH]
    first = hashes.search_sorted(hashed[HASH], side="left")
    last = hashes.search_sorted(hashed[HASH], side="right")
    hit = last > first  # vectorized: only the (few) hits reach Python
    days = history["day"]
    rows = [
        (rid, day)
        for rid, lo, hi in zip(hashed["request_id"].filter(hit), first.filter(hit), last.filter(hit))
        for day in days.slice(lo, hi - lo)
    ]
    return pl.DataFrame(rows, schema={"request_id": pl.String, "day": pl.Date}, orient="row")
