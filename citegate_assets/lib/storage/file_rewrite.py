"""The working DuckDB file rewritten once text has left it (docs/retention.md, "The working file").

DuckDB never overwrites the blocks an update or a delete frees: until it happens to reuse them they still hold the
old values, removed text included. So each removal of text (retention, `citegate forget`, the nightly re-drop of
a forgotten request's text) adds a row to pending_file_rewrite in its own transaction, and once it has committed,
its caller rewrites the file: every live row copied into a new file (COPY FROM DATABASE writes no free block),
which is renamed over the old one. Nothing else is rewritten: a night without a removal costs one read of the flag.

Crash safety: the new file is `<warehouse>.tmp-<pid>` until it is complete, checked (every table's rows) and
fsynced; the rename is atomic. A kill before it leaves the old file, still marked, so the next removal step rewrites
it, and deletes the dead process's temporary file first (it holds no removed text, but other text).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from citegate_assets.lib.core.durable import replace_durably
from citegate_assets.lib.core.runlock import open_lock
from citegate_assets.lib.storage.publish import check_counts, remove_stale_temporaries, row_counts
from citegate_assets.lib.storage.warehouse import connect, query, run_script, sql_identifier, sql_literal

PENDING_TABLE = "pending_file_rewrite"


@dataclass(frozen=True)
class Rewrite:
    path: Path
    bytes_before: int
    bytes_after: int
    seconds: float


def mark_text_removed(con: duckdb.DuckDBPyConnection, why: str) -> None:
    """In the transaction that removed text: the file must be rewritten once it has committed."""
    run_script(con, "rewrite/mark", {"why": why})


def rewrite_pending(con: duckdb.DuckDBPyConnection) -> bool:
    [(pending,)] = query(con, "rewrite/pending").fetchall()
    return bool(pending)


def rewrite_if_text_removed(warehouse: Path) -> Rewrite | None:
    """Rewrite the working file when a removal of text marked it (None: nothing to do). The caller holds the run lock
    exclusively and has closed its connections to the file: one left open in this process would keep writing to
    the old file after the rename, so the rewrite refuses to go on (RuntimeError) while one is."""
    warehouse = Path(warehouse)
    with open_lock(warehouse):
        remove_stale_temporaries(warehouse)  # a killed rewrite's copy
        with connect(warehouse) as con:
            if not rewrite_pending(con):
                return None
        return _rewrite(warehouse)


def _rewrite(warehouse: Path) -> Rewrite:
    started = time.monotonic()
    before = warehouse.stat().st_size
    tmp = warehouse.with_name(f"{warehouse.name}.tmp-{os.getpid()}")
    _remove(tmp)
    try:
        with connect(warehouse) as con:
            con.execute("checkpoint")  # the old file holds everything; its WAL is empty
            [(source,)] = con.sql("select current_database()").fetchall()
            expected = row_counts(con)
            alias = "rewritten" if source != "rewritten" else "rewritten_copy"
            con.execute(f"attach {sql_literal(tmp)} as {alias}")
            try:
                con.execute(f"copy from database {sql_identifier(source)} to {alias}")
                con.execute(f"delete from {alias}.main.{PENDING_TABLE}")
                con.execute(f"checkpoint {alias}")
            finally:
                con.execute(f"detach {alias}")
        _check_closed(warehouse)
        with connect(tmp, read_only=True) as con:
            copied = row_counts(con)
        check_counts(expected | {f"main.{PENDING_TABLE}": 0}, copied, "rewrite")
        for leftover in (warehouse, tmp):
            wal = leftover.with_name(leftover.name + ".wal")
            if wal.exists():
                raise RuntimeError(f"{wal}: a write-ahead log is left after the checkpoint; the file is not rewritten")
        replace_durably(tmp, warehouse)
    except BaseException:
        _remove(tmp)
        raise
    return Rewrite(warehouse, before, warehouse.stat().st_size, time.monotonic() - started)


def _check_closed(warehouse: Path) -> None:
    """No other connection of this process holds the file: DuckDB then refuses one with another configuration."""
    try:
        duckdb.connect(str(warehouse), read_only=True).close()
    except duckdb.ConnectionException as exc:
        raise RuntimeError(
            f"{warehouse}: still open in this process; not rewriting it (a connection left open would go on "
            f"writing to the old file). Detail: {exc}"
        ) from None


def _remove(tmp: Path) -> None:
    for path in (tmp, tmp.with_name(tmp.name + ".wal")):
        path.unlink(missing_ok=True)
