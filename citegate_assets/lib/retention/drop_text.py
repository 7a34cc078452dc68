"""Retention: drop the raw prompt and chunk text of day partitions older than [retention] text_days (docs/retention.md).

What is dropped (set to null): every copy of a prompt's, a chunk's, a citation's or an answer's text in the day
tables (TEXT_TABLES), and the judge cache's entries on the claims dropped (deleted). What stays: sha256 hashes,
offsets, lengths, reasons, verdicts and every metric input, so each weekly metric recomputes to the same value from
what is kept. The same updates serve `citegate forget` (lib/retention/forget.py), scoped by request id instead of by
day.
Each marks the working file for a rewrite (lib/storage/file_rewrite.py): its freed blocks still hold what was dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta

import duckdb

from citegate_assets.lib.storage.file_rewrite import mark_text_removed
from citegate_assets.lib.storage.text_store import rewrite_files_in_scope, sweep
from citegate_assets.lib.storage.warehouse import load_sql, query, run_script, transaction
from citegate_assets.lib.support.judge.batch_state import PENDING_PREFIX

# The tables holding text copies, each with its own update in sql/retention/<table>.sql (the order is the
# report's, and judge_cache's entries are found by the claims citations still holds). Not here, with why
# (docs/retention.md): prompt_sections, best_evidence, numeric_checks, support_sample, provenance_results,
# metric_lineage (offsets, ids, numbers and verdicts only).
TEXT_TABLES: tuple[str, ...] = (
    "prompts",
    "retrievals",
    "judge_cache",  # deleted: the entries on the claims in scope
    "judge_batches",  # the provider's errors (its batches are found by the claims too)
    "citations",
    "citation_queue",
    "answer_rejects",
    "ingest_rejects",
    "support_verdicts",
    "judge_agreement",
    "hand_labels",  # by request only: forget
    "review_outcomes",  # by request only: forget
)
# What re-reading the landing folder or the reviews log can bring back into the warehouse for a forgotten request
REFILLED_TABLES = ("ingest_rejects", "hand_labels", "review_outcomes")


def cutoff_day(text_days: int, today: date) -> date:
    """The first day whose text is kept: days before it are older than text_days days before today (UTC)."""
    return today - timedelta(days=text_days)


EVERY_DAY = (date.min, date.max)


def drop_text(
    con: duckdb.DuckDBPyConnection,
    *,
    days: Iterable[date] = (),
    request_ids: Iterable[str] = (),
    span: tuple[date, date] | None = None,
) -> dict[str, int]:
    """Null every text column of TEXT_TABLES in the given days or for the given requests (in the caller's
    transaction); return the rows changed per table (rows already without text are not counted). span: the
    first and last day any of it can be on (a constant filter, so only those days' row groups are read);
    by default the days given, or every day."""
    run_script(con, "retention/scope")
    day_list = sorted(set(days))
    id_list = sorted(set(request_ids))
    if day_list:
        con.execute("insert into scope_days select unnest($d::date[])", {"d": day_list})
    if id_list:
        con.execute("insert into scope_requests select unnest($r::varchar[])", {"r": id_list})
    first, last = span or ((day_list[0], day_list[-1]) if day_list and not id_list else EVERY_DAY)
    rewrite_files_in_scope(con, first, last)  # before prompts' update: the rows out of scope move to new files
    return {table: _update(con, table, first, last) for table in TEXT_TABLES}


def _update(con: duckdb.DuckDBPyConnection, table: str, first: date, last: date) -> int:
    statement = load_sql(f"retention/{table}")
    params = {"first": first, "last": last, "pending": PENDING_PREFIX}
    [(rows,)] = con.execute(statement, {k: v for k, v in params.items() if f"${k}" in statement}).fetchall()
    return int(rows)


def days_with_text(con: duckdb.DuckDBPyConnection, cutoff: date) -> list[date]:
    return [d for (d,) in query(con, "retention/days_with_text", {"cutoff": cutoff}).fetchall()]


def apply_retention(
    con: duckdb.DuckDBPyConnection, text_days: int, now: datetime, *, keep_days: Iterable[date] = ()
) -> dict[date, dict[str, int]]:
    """Drop the text of every day before the cutoff that still holds some, one transaction per day, and record
    each day's rows per table in text_retention. keep_days (the run's own days) are left for the next night,
    whatever the order of the run's steps. text_days = 0 keeps all text (returns {})."""
    if text_days <= 0:
        return {}
    kept = set(keep_days)
    dropped: dict[date, dict[str, int]] = {}
    for day in days_with_text(con, cutoff_day(text_days, now.date())):
        if day in kept:
            continue
        with transaction(con):
            rows = drop_text(con, days=[day])
            if any(rows.values()):
                mark_text_removed(con, "retention")
            for table, n in rows.items():
                if n or (table == "prompts" and not any(rows.values())):  # a day with nothing left is recorded too
                    params = {"day": day, "table_name": table, "rows_dropped": n, "text_days": text_days}
                    run_script(con, "retention/record_dropped", params | {"dropped_at": now})
        dropped[day] = rows
    if dropped:
        sweep(con)  # the dropped days' text files, now named by no row (retention runs under the exclusive lock)
    return dropped


def scrub_forgotten(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Drop again, for every forgotten request, the text the night's re-reads brought back (REFILLED_TABLES)."""
    with transaction(con):
        run_script(con, "retention/scope")
        run_script(con, "retention/forgotten_scope")
        rows = {table: _update(con, table, *EVERY_DAY) for table in REFILLED_TABLES}
        if any(rows.values()):
            mark_text_removed(con, "forgotten text read again")
        return rows


def retained_days(con: duckdb.DuckDBPyConnection) -> list[date]:
    """Days whose text retention dropped (text_retention), oldest first."""
    return [d for (d,) in query(con, "retention/retained_days").fetchall()]


def run_days_without_text(con: duckdb.DuckDBPyConnection, days: Iterable[date]) -> list[tuple[date, int, int, bool]]:
    """(day, prompts without text, prompts, day retained) for the given days that hold prompts without text."""
    return query(con, "retention/run_days_without_text", {"days": sorted(set(days))}).fetchall()


def refusal(rows: list[tuple[date, int, int, bool]]) -> str:
    """Why a run over these days must not re-gate them, in words."""
    parts = []
    for day, without, total, retained in rows:
        why = "its text was dropped by [retention] text_days" if retained else "forgotten (citegate forget)"
        parts.append(f"{day}: {without} of {total} prompts have no text ({why})")
    return (
        "refusing to re-gate days whose prompt text is gone: their stored verdicts stand, and re-gating would "
        "turn them into different ones. " + "; ".join(parts) + ". Run only later days (--start), or raise "
        "[retention] text_days for days that still hold their text."
    )
