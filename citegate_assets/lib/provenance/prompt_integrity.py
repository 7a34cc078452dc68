"""Which stored days the blocking check `prompts_match_their_sha256` re-hashes tonight.

Re-hashing every stored prompt every night grows with history (0.22 -> 1.75 s over 30 nights of 2,000 requests;
hours at 10 million a day). The night's own days are always verified, and the older days in a rotation of
ROTATION_DAYS nights, so each stored day is re-hashed at least once in any ROTATION_DAYS consecutive nights;
the count of stored prompts (a deletion anywhere) is still checked over the whole log every night.

A prompt whose text was dropped by retention or `citegate forget` (docs/retention.md) has no text to re-hash: it
counts as retained, never as tampered (sql/ingest/check_prompt_hashes.sql compares only prompts with text), and the
check reports how many (prompts_without_text).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

import duckdb

from citegate_assets.lib.storage.warehouse import query

ROTATION_DAYS = 7


def days_to_verify(stored_days: Iterable[date], run_days: Iterable[date], tonight: date) -> list[date]:
    """The run's days, plus the stored days whose turn it is tonight; every stored day when the run has no days."""
    stored = sorted(set(stored_days))
    run = set(run_days)
    if not run:
        return stored
    turn = tonight.toordinal() % ROTATION_DAYS
    return sorted({d for d in stored if d in run or d.toordinal() % ROTATION_DAYS == turn})


def prompts_without_text(con: duckdb.DuckDBPyConnection, days: Iterable[date]) -> int:
    """Stored prompts of these days kept by their sha256 only (text dropped by retention or forget)."""
    [(n,)] = query(con, "retention/prompts_without_text", {"days": sorted(set(days))}).fetchall()
    return int(n)
