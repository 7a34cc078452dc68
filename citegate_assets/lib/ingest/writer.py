"""Ingest's writer: each prepared batch in one transaction on a second connection, in the order the batches were
read, under a bounded DuckDB memory_limit (a batch that needs more for a long line is written again with room)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from citegate_assets.lib.ingest.ledger import ledger_frame
from citegate_assets.lib.storage.text_files import remove_files
from citegate_assets.lib.storage.text_store import text_dir
from citegate_assets.lib.storage.warehouse import run_script, transaction

__all__ = ["INGEST_MEMORY_LIMIT_BYTES", "BatchWriter", "IngestWriteError", "ingest_settings", "out_of_memory"]


# DuckDB's buffer pool keeps every page ingest wrote until it reaches its limit (4 GB): the peak grew with the file.
# Ingest only appends and looks up request ids: 64 MiB keeps the peak flat (a batch may spill a little to disk).
INGEST_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024
# DuckDB checkpoints once the WAL reaches 16 MiB, and each checkpoint compresses every table's unfilled last row group
# anew (up to 122,880 rows: ~0.3 CPU-s for retrievals alone on a large warehouse). Ingest lets the WAL grow to this
# much first: about one checkpoint per 40,000 requests of 15 KB (64 MiB: 6 CPU-s more per 100,000; peak RSS the same).
INGEST_CHECKPOINT_BYTES = 256 * 1024 * 1024
# Once a run has written a line this long, checkpoints come every 64 MiB of WAL instead: a refused copy's reject row
# keeps the whole line, and 256 MiB of such rows outgrow the room a long line gets (LINE_MEMORY_FACTOR x its bytes).
LONG_LINE_BYTES = 1024 * 1024
LONG_LINE_CHECKPOINT_BYTES = 64 * 1024 * 1024
# DuckDB's threads for the batches' inserts and checkpoints: with the parse processes on every core, a second one only
# split small tasks, ~0.4 CPU-s more per 20,000 requests of 15 KB for no speed (the run's wall time the same)
INGEST_THREADS = 1
LINE_MEMORY_FACTOR = 4  # a batch's limit grows by 4x its longest line: a 32 MiB line's raw_line needs ~2 pinned copies


class IngestWriteError(RuntimeError):
    """The warehouse could not take a batch (disk full, I/O error); nothing committed is lost."""


class BatchWriter:
    """Writes prepared batches on a second connection in a worker thread, one at a time and in order,
    while the main thread parses and normalizes the next batch (DuckDB releases the GIL)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, max_line_bytes: int = 0):
        self._cursor = con.cursor()
        self._roomy = INGEST_MEMORY_LIMIT_BYTES + LINE_MEMORY_FACTOR * max_line_bytes  # for a batch that needs it
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citegate-ingest-writer")
        self._pending: Future | None = None
        self._limit = _MemoryLimit(self._cursor)
        self._files = ""
        # the longest line written this run: any later commit may checkpoint its text (a duplicate's reject row
        # keeps the whole line), so no later batch gets less room than it did
        self._longest = 0
        [(self._database,)] = con.sql(
            "select coalesce(path, database_name) from duckdb_databases() where database_name = current_database()"
        ).fetchall()
        self.text_folder = text_dir(con)  # None: an in-memory warehouse keeps its prompt text inline

    def submit(self, relations: dict[str, pl.DataFrame], ledger: list[dict], longest_line: int = 0) -> None:
        self.drain()
        self._files = ", ".join(sorted({row["file_name"] for row in ledger}))[:300]
        if longest_line > LONG_LINE_BYTES >= self._longest:
            self._cursor.execute("set checkpoint_threshold = $1", [f"{LONG_LINE_CHECKPOINT_BYTES}B"])
        self._longest = max(self._longest, longest_line)
        memory = INGEST_MEMORY_LIMIT_BYTES + LINE_MEMORY_FACTOR * self._longest
        self._pending = self._pool.submit(
            _write_batch, self._cursor, relations, ledger, memory, self._roomy, self._limit, self.text_folder
        )

    def drain(self) -> None:
        """Wait for the batch in flight; its error, if any, is raised here, naming the warehouse and the files."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            try:
                pending.result()
            except (duckdb.Error, OSError) as exc:
                raise IngestWriteError(_write_failure(self._database, self._files, exc)) from exc

    def close(self) -> None:
        try:
            self.drain()
        finally:
            self._pool.shutdown(wait=True)
            self._cursor.close()


def _write_failure(database: str, files: str, exc: BaseException) -> str:
    text = str(exc)
    full = (
        getattr(exc, "errno", None) == errno.ENOSPC
        or "No space left on device" in text
        or "disk is full" in text.lower()
    )
    what = "the disk is full" if full else "the warehouse could not be written"
    first = text.splitlines()[0] if text else type(exc).__name__
    return (
        f"{what} while writing {database} (rows from {files or 'the landing ledger'}): {first}. "
        "Nothing committed before is lost and this batch was rolled back; "
        + (
            "free space, then run again: it resumes where it stopped."
            if full
            else "fix the cause, then run again: it resumes where it stopped."
        )
    )


class _MemoryLimit:
    """The writer's memory_limit, set only when a batch needs another: DuckDB trims the process's heap at every set
    (malloc_trim), and every thread then faulted its freed pages in again (on the 20,000-request day: 40 trims, 26
    now; the ingest process's page faults ~475k, ~420k now)."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection):
        self.cursor = cursor
        self.current: int | None = None

    def set(self, memory: int) -> None:
        if memory != self.current:
            self.cursor.execute("set memory_limit = $1", [f"{int(memory)}B"])
            self.current = memory


def _write_batch(
    cursor: duckdb.DuckDBPyConnection,
    relations: dict[str, pl.DataFrame],
    ledger: list[dict],
    memory: int,
    roomy: int,
    limit: _MemoryLimit,
    folder: Path | None = None,
) -> None:
    """One transaction under the small limit; a batch that does not fit (a line near max_line_bytes) is rolled back
    and written again with room for the longest line allowed. The prompt text is in the text folder already (the
    parse step wrote it, lib/storage/text_files.py): files the transaction does not commit are never read, and are
    removed
    here."""
    try:
        try:
            _write_batch_within(cursor, relations, ledger, memory, limit)
        except duckdb.Error as exc:
            if not out_of_memory(exc) or roomy <= memory:
                raise
            _write_batch_within(cursor, relations, ledger, roomy, limit)
    except BaseException:
        if folder is not None:
            remove_files(folder, relations["batch_prompts"]["text_file"].unique().drop_nulls().to_list())
        raise


def out_of_memory(exc: duckdb.Error) -> bool:
    text = str(exc)
    return isinstance(exc, duckdb.OutOfMemoryException) or "Out of Memory" in text or "failed to pin block" in text


def _write_batch_within(
    cursor: duckdb.DuckDBPyConnection,
    relations: dict[str, pl.DataFrame],
    ledger: list[dict],
    memory: int,
    limit: _MemoryLimit,
) -> None:
    relations = {**relations, "batch_ledger": ledger_frame(ledger)}
    limit.set(memory)
    try:
        with transaction(cursor):
            for rel, df in relations.items():
                cursor.register(rel, df.to_arrow())
            run_script(cursor, "ingest/insert_batch")
            run_script(cursor, "ingest/ledger_upsert")
    finally:
        for rel in relations:
            try:
                cursor.unregister(rel)
            except duckdb.Error:
                pass


@contextmanager
def ingest_settings(con: duckdb.DuckDBPyConnection, limit_bytes: int) -> Iterator[None]:
    """DuckDB's settings while ingest appends, put back afterwards: the memory_limit lowered (peak RSS flat as the
    files grow), the checkpoint threshold raised (INGEST_CHECKPOINT_BYTES) and one thread (INGEST_THREADS)."""
    [(prior, threshold, threads)] = con.sql(
        "select current_setting('memory_limit'), current_setting('checkpoint_threshold'), current_setting('threads')"
    ).fetchall()
    con.execute("set memory_limit = $1", [f"{int(limit_bytes)}B"])
    con.execute("set checkpoint_threshold = $1", [f"{INGEST_CHECKPOINT_BYTES}B"])
    con.execute("set threads = $1", [INGEST_THREADS])
    try:
        yield
    finally:
        con.execute("set memory_limit = $1", [_restorable(prior)])
        con.execute("set checkpoint_threshold = $1", [_restorable(threshold)])
        con.execute("set threads = $1", [threads])


def _restorable(shown: str) -> str:
    """DuckDB shows the limit cut to one decimal ('3.7 GiB' for 4 GB); setting that back would lower it 0.1 GiB
    each run. Half a step more shows the same and stays within 0.1 unit of the limit the caller had."""
    number, _, unit = shown.partition(" ")
    try:
        return f"{float(number) + 0.05} {unit}"
    except ValueError:
        return shown
