"""Landing folder → warehouse: stream the new bytes of each log file in batches, validate, normalize, append.

The unit of progress is a landing file, known by its content (lib/ingest/ledger.py). The ledger records, per file,
the bytes and lines consumed and the sha256 of exactly those bytes, in the same transaction as the rows, so
re-ingesting is a no-op, a killed run resumes where it stopped, a rotated file is read on under its new name,
and a file that is still being written gives up only its complete lines. Batches span files, so a folder of
many small files costs a few transactions, not one per file. Batches are parsed and normalized in worker processes
on a large run ([ingest] workers, lib/ingest/workers.py) and written here in the order they were read.

A file in a trace format (lib/adapters, docs/adapters.md) is detected by its first line and converted as a
whole once it has settled: each call becomes one line-equivalent (its citegate-log/1 record) fed through the same
record path, with the source line that holds the call; a call the adapter could not convert, and a bad source
line, become reject rows. Its ledger row counts items (calls and line rejects) where a log file's counts lines,
so `lines_read = records_ingested + records_rejected` holds for both; a file that grows is converted again and
the items it gave before are skipped, by count (adapters give items in source-line order).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import BinaryIO

import duckdb
import polars as pl

from citegate_assets.lib.core.lines import (
    READ_ERRORS,
    DecompressedTooLarge,
    Line,
    PrefixChanged,
    ReadState,
    first_line_fingerprint,
    open_stream,
    prefix_matches,
    read_lines,
)
from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP, utc_now
from citegate_assets.lib.ingest.adapters import (
    ADAPTER_ERROR,
    HEAD_BYTES,
    Adapter,
    Call,
    LineReject,
    Partners,
    TraceFileTooLarge,
    convert_lines,
    detect,
    is_json_value,
    read_head,
    record_line,
    registry,
    whole_document,
)
from citegate_assets.lib.ingest.batch import STORE_RETRIEVED_TEXT_ONCE
from citegate_assets.lib.ingest.known_requests import KnownRequests
from citegate_assets.lib.ingest.landing import (
    LOG_SUFFIXES,
    Entry,
    OutsideLanding,
    is_trace_name,
    landing_entries,
    landing_folder,
    landing_root,
    open_entry,
)
from citegate_assets.lib.ingest.ledger import (
    DONE,
    FileTally,
    Ledger,
    distinct_id,
    entry_id,
    ledger_frame,
    ledger_row,
    path_id,
    trace_id,
)
from citegate_assets.lib.ingest.records import Reject
from citegate_assets.lib.ingest.settings import IngestSettings as Config
from citegate_assets.lib.ingest.trace_partners import landing_partners, without
from citegate_assets.lib.ingest.workers import (
    BatchLine,
    Claim,
    Parsed,
    ParsedBatch,
    ParsePool,
    reject_row,
    resolve_workers,
    valid_line_text,
)
from citegate_assets.lib.storage.text_files import keep_only, remove_files
from citegate_assets.lib.storage.text_store import sweep, text_dir
from citegate_assets.lib.storage.warehouse import run_script, transaction

__all__ = ["LOG_SUFFIXES", "IngestSummary", "IngestWriteError", "ingest_landing"]

BATCH_LINES = 2000
BATCH_BYTES = 8 * 1024 * 1024  # a batch's working set is ~20x its bytes; 8 MB keeps the peak under ~0.5 GB, flat
# DuckDB's buffer pool keeps every page ingest wrote until it reaches its limit (4 GB): the peak grew with the file.
# Ingest only appends and looks up request ids: 64 MiB keeps the peak flat (a batch may spill a little to disk).
INGEST_MEMORY_LIMIT_BYTES = 64 * 1024 * 1024
LINE_MEMORY_FACTOR = 4  # a batch's limit grows by 4x its longest line: a 32 MiB line's raw_line needs ~2 pinned copies

REJECT_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "source_file": pl.String,
    "line_no": pl.Int64,
    "day": pl.Date,
    "request_id": pl.String,
    "reason": pl.String,
    "detail": pl.String,
    "raw_line": pl.String,
    "rejected_at": UTC_TIMESTAMP,
}
CONFLICT_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "request_id": pl.String,
    "day": pl.Date,
    "existing_sha256": pl.String,
    "conflicting_sha256": pl.String,
    "existing_source": pl.String,
    "source_file": pl.String,
    "source_line": pl.Int64,
    "recorded_at": UTC_TIMESTAMP,
}
SOURCE_LINES_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "request_id": pl.String,
    "source_file": pl.String,
    "line_no": pl.Int64,
}


class IngestWriteError(RuntimeError):
    """The warehouse could not take a batch (disk full, I/O error); nothing committed is lost."""


@dataclass
class IngestSummary:
    files_seen: int = 0
    files_read: int = 0
    lines_read: int = 0
    records_ingested: int = 0
    records_rejected: int = 0
    answers_rejected: int = 0
    bytes_read: int = 0
    files_waiting: int = 0  # an unterminated last line, an unfinished .gz or an unsettled trace file held back
    bytes_held: int = 0
    days: set[date] = field(default_factory=set)
    trace_files: int = 0  # trace-format files converted this run
    calls_converted: int = 0  # their new items: calls (ingested or rejected) and line rejects
    parse_workers: int = 0  # worker processes that parsed batches this run (0: all parsed in the ingest process)


Progress = Callable[[str, int, int], None]  # (file name, lines read so far, bytes read so far)


class BatchWriter:
    """Writes prepared batches on a second connection in a worker thread, one at a time and in order,
    while the main thread parses and normalizes the next batch (DuckDB releases the GIL)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, max_line_bytes: int = 0):
        self._cursor = con.cursor()
        self._roomy = INGEST_MEMORY_LIMIT_BYTES + LINE_MEMORY_FACTOR * max_line_bytes  # for a batch that needs it
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citegate-ingest-writer")
        self._pending: Future | None = None
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
        self._longest = max(self._longest, longest_line)
        memory = INGEST_MEMORY_LIMIT_BYTES + LINE_MEMORY_FACTOR * self._longest
        self._pending = self._pool.submit(
            _write_batch, self._cursor, relations, ledger, memory, self._roomy, self.text_folder
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


def _write_batch(
    cursor: duckdb.DuckDBPyConnection,
    relations: dict[str, pl.DataFrame],
    ledger: list[dict],
    memory: int,
    roomy: int,
    folder: Path | None = None,
) -> None:
    """One transaction under the small limit; a batch that does not fit (a line near max_line_bytes) is rolled back
    and written again with room for the longest line allowed. The prompt text is in the text folder already (the
    parse step wrote it, lib/storage/text_files.py): files the transaction does not commit are never read, and are
    removed
    here."""
    try:
        try:
            _write_batch_within(cursor, relations, ledger, memory)
        except duckdb.Error as exc:
            if not _out_of_memory(exc) or roomy <= memory:
                raise
            _write_batch_within(cursor, relations, ledger, roomy)
    except BaseException:
        if folder is not None:
            remove_files(folder, relations["batch_prompts"]["text_file"].unique().drop_nulls().to_list())
        raise


def _out_of_memory(exc: duckdb.Error) -> bool:
    text = str(exc)
    return isinstance(exc, duckdb.OutOfMemoryException) or "Out of Memory" in text or "failed to pin block" in text


def _write_batch_within(
    cursor: duckdb.DuckDBPyConnection, relations: dict[str, pl.DataFrame], ledger: list[dict], memory: int
) -> None:
    relations = {**relations, "batch_ledger": ledger_frame(ledger)}
    cursor.execute("set memory_limit = $1", [f"{int(memory)}B"])
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


@dataclass
class _Item:
    """One item of a converted trace file, fed through a batch like a line: a call's record as a citegate-log/1
    line (numbered by the source line holding the call), or an item rejected by its adapter (`reject`)."""

    line: Line
    reject: Reject | None = None
    request_id: str | None = None
    other_lines: tuple[int, ...] = ()  # the other source lines the call's record was read from
    other_files: tuple[tuple[str, int], ...] = ()  # lines of other files it was read from (an OTel logs file)


@dataclass
class _FileState:
    """What of a file's ledger row is fixed when its lines are committed (its counts come when they are parsed)."""

    status: str
    detail: str | None
    sha256: str
    consumed: int
    first_seen: datetime | None
    retire: list[str]

    @staticmethod
    def of(f: _File) -> _FileState:
        return _FileState(f.status, f.detail, f.state.digest(), f.state.consumed, f.first_seen, list(f.retire))


@dataclass
class _Batch:
    """A committed batch while it is parsed: its lines, its files' states at the commit, its file events."""

    lines: list[tuple[_File, Line | _Item]]
    files: list[tuple[_File, _FileState]]
    events: list[tuple[dict | None, dict | None]]
    parsed: Parsed


@dataclass
class _File:
    """One landing file being read this run: its identity, what of it is consumed, and its counts."""

    entry: Entry
    file_id: str
    size: int
    mtime_ns: int
    first_seen: datetime | None
    state: ReadState = field(default_factory=ReadState)
    tally: FileTally = field(default_factory=FileTally)
    days: set[date] = field(default_factory=set)
    retire: list[str] = field(default_factory=list)
    status: str = "partial"
    detail: str | None = None


def ingest_landing(
    con: duckdb.DuckDBPyConnection,
    landing: str | Path,
    config: Config,
    *,
    now: datetime | None = None,
    progress: Progress | None = None,
    batch_lines: int = BATCH_LINES,
    final: bool = False,
    workers: int | None = None,
) -> IngestSummary:
    """Ingest the new complete lines of every log file in the landing folder. Never raises on bad input.

    final=True: every file counts as finished (its unterminated last line is a line), as does any file that
    has not changed for [ingest].settle_seconds. Raises IngestWriteError when the warehouse cannot be written.
    workers: parse processes, overriding [ingest].workers (0 = one per core); the same rows whatever the number
    (lib/ingest/workers.py).
    """
    run = _Run(con, landing_root(landing), config, now or utc_now(), progress, batch_lines, final, workers)
    sweep(con)  # a killed ingest's text files: no row names them (ingest runs under the exclusive run lock)
    with bounded_memory(con, INGEST_MEMORY_LIMIT_BYTES):  # around the writer too: it sets the limit per batch
        try:
            for entry in landing_entries(run.root):
                run.summary.files_seen += 1
                run.entry(entry)
            run.flush()
            run.writer.drain()
            run.summary.parse_workers = run.parser.workers if run.parser.spawned else 0
        finally:
            try:
                run.parser.close()
            finally:
                run.writer.close()
    return run.summary


@contextmanager
def bounded_memory(con: duckdb.DuckDBPyConnection, limit_bytes: int) -> Iterator[None]:
    """The database's memory_limit lowered for the block (peak RSS flat as the files grow), then put back."""
    [(prior,)] = con.sql("select current_setting('memory_limit')").fetchall()
    con.execute("set memory_limit = $1", [f"{int(limit_bytes)}B"])
    try:
        yield
    finally:
        con.execute("set memory_limit = $1", [_restorable(prior)])


def _restorable(shown: str) -> str:
    """DuckDB shows the limit cut to one decimal ('3.7 GiB' for 4 GB); setting that back would lower it 0.1 GiB
    each run. Half a step more shows the same and stays within 0.1 unit of the limit the caller had."""
    number, _, unit = shown.partition(" ")
    try:
        return f"{float(number) + 0.05} {unit}"
    except ValueError:
        return shown


class _Run:
    """The state of one ingest run: the folder, the ledger, the lines and ledger rows batched for the next
    commit, the request ids seen, and the counts."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        root: Path,
        config: Config,
        now: datetime,
        progress: Progress | None,
        batch_lines: int,
        final: bool,
        workers: int | None = None,
    ):
        self.con, self.root, self.config, self.now, self.progress = con, root, config, now, progress
        self.landing = str(root)
        self.limits = config.ingest
        self.batch_lines, self.final = batch_lines, final
        self.ledger = Ledger.load(con)
        self.summary = IngestSummary()
        self.writer = BatchWriter(con, config.ingest.max_line_bytes)
        self.text_folder = self.writer.text_folder  # None: an in-memory warehouse keeps its prompt text inline
        self.parser = ParsePool(
            config, resolve_workers(config.ingest.workers if workers is None else workers), self.text_folder
        )
        self.inflight: deque[_Batch] = deque()  # committed batches being parsed, in commit order
        # request ids of this run, committed or still in flight: (sha256, source, its text removed by forget/retention)
        self.run_seen: dict[str, tuple[str, str, bool]] = {}
        self.known = KnownRequests(con)  # ids committed before this run
        self.lines: list[tuple[_File, Line | _Item]] = []
        self.nbytes = 0
        self.files: dict[int, _File] = {}  # files whose ledger row goes with the next commit
        self.events: list[tuple[dict | None, dict | None]] = []  # (whole-file reject row, ledger row), either None
        self.partners: dict[str, Partners] | None = None  # trace files that join across files, read when needed

    # -- entries ---------------------------------------------------------------------------------
    def entry(self, entry: Entry) -> None:
        if entry.reason:
            self.report(entry.name, entry.reason, entry.detail)
            return
        with ExitStack() as stack:
            try:
                fh, st = stack.enter_context(open_entry(self.root, entry))
            except (OSError, OutsideLanding) as exc:
                refused = landing_folder(self.root).refused(entry, exc)
                if refused is not None:  # None: removed since the folder was listed
                    self.report(entry.name, *refused)
                return
            self.read_file(entry, fh, st)

    def report(self, name: str, reason: str, detail: str | None) -> None:
        """An entry that is not a file to read: one reject row while it stays so; looked at again every run."""
        eid = entry_id(self.landing, name)
        prior = self.ledger.by_id.get(eid)
        if prior is not None and prior["detail"] == detail:
            return
        reject = self._file_reject(name, reason, detail)
        self._event(
            reject,
            ledger_row(file_id=eid, landing=self.landing, name=name, status="skipped", now=self.now, detail=detail),
        )

    # -- one file --------------------------------------------------------------------------------
    def read_file(self, entry: Entry, fh: BinaryIO, st: os.stat_result) -> None:
        name = entry.name
        seen = self.ledger.at(self.landing, name)
        if seen and seen["size_bytes"] == st.st_size and seen["mtime_ns"] == st.st_mtime_ns and seen["status"] in DONE:
            return  # unchanged since it was read to its end (or found unreadable at this very size)
        settled = self.final or time.time() - st.st_mtime >= self.limits.settle_seconds
        retire = [i for i in (entry_id(self.landing, name),) if i in self.ledger.by_id]
        pid = path_id(self.landing, name)
        try:
            fingerprint = first_line_fingerprint(open_stream(fh, entry.compressed), settled)
        except READ_ERRORS as exc:
            self._unidentified(entry, st, retire, settled, exc)
            return
        if fingerprint is None:
            self._unidentified(entry, st, retire, settled, None)
            return
        if pid in self.ledger.by_id:
            retire.append(pid)
        adapter = self._detect(entry, fh)
        if adapter is not None or is_trace_name(name):
            self.read_trace(entry, fh, st, fingerprint, adapter, settled, retire)
            return
        if any(
            pending.file_id in (fingerprint, distinct_id(fingerprint, self.landing, name))
            for pending in self._in_flight()
        ):
            self.flush()  # the same file under a second name in this run: count what the first one read first
        row = self.ledger.by_id.get(fingerprint)
        if row is not None:
            place = (row["landing"], row["file_name"])
            f = self._file(entry, st, fingerprint, row, retire)
            try:
                self._consume(f, fh, settled, verify=(row["bytes_consumed"], row["lines_read"], row["file_sha256"]))
                return
            except PrefixChanged as exc:
                if place == (self.landing, name):
                    self._changed(entry, st, row, exc)
                    return
            # the same first line as a file read elsewhere, different bytes after it: a file of its own
            fingerprint = distinct_id(fingerprint, self.landing, name)
            row = self.ledger.by_id.get(fingerprint)
            if row is not None:
                f = self._file(entry, st, fingerprint, row, retire)
                try:
                    self._consume(f, fh, settled, verify=(row["bytes_consumed"], row["lines_read"], row["file_sha256"]))
                except PrefixChanged as exc:
                    self._changed(entry, st, row, exc)
                return
        legacy = self.ledger.legacy(name)
        skip = 0
        f = self._file(entry, st, fingerprint, None, retire)
        if legacy is not None and _legacy_prefix_matches(fh, legacy):
            skip = legacy["lines_read"]  # read by a release before identities: go on after its lines
            f.tally = FileTally(
                legacy["lines_read"], legacy["records_ingested"], legacy["records_rejected"], legacy["answers_rejected"]
            )
            f.first_seen = legacy["first_seen_at"]
            f.retire.append(legacy["file_id"])
        self._consume(f, fh, settled, skip_lines=skip)

    # -- one trace-format file ---------------------------------------------------------------------
    def _detect(self, entry: Entry, fh: BinaryIO) -> Adapter | None:
        """The trace format of the file's first line, or None (a citegate-log/1 file, or no format known)."""
        fh.seek(0)
        try:
            first = next(
                read_lines(
                    open_stream(fh, entry.compressed),
                    ReadState(),
                    max_line_bytes=self.limits.max_line_bytes,
                    max_inflated_bytes=self.limits.max_decompressed_bytes if entry.compressed else None,
                    final=True,
                ),
                None,
            )
        except (*READ_ERRORS, DecompressedTooLarge):
            return None  # the reader that follows reports it
        if first is None or first.too_long:
            return None
        fh.seek(0)
        try:
            head = read_head(open_stream(fh, entry.compressed), HEAD_BYTES)
        except READ_ERRORS:
            return None
        return detect(first.raw, head)

    def read_trace(
        self,
        entry: Entry,
        fh: BinaryIO,
        st: os.stat_result,
        fingerprint: str,
        adapter: Adapter | None,
        settled: bool,
        retire: list[str],
    ) -> None:
        """Convert a trace file as a whole once it has settled (pairing needs every span of a trace); the items
        it gave on an earlier run are skipped. adapter None: a *.json file whose first line is of no format (it may
        still be one JSON document over several lines)."""
        name = entry.name
        here = self.ledger.at(self.landing, name)
        known = here if here is not None and here["file_id"].startswith("trace:") else None
        if not settled:
            detail = (
                f"{name}: a trace file, converted as a whole once it has not changed for [ingest].settle_seconds "
                "(or `citegate run --final`)"
            )
            self._hold(entry, st, retire, known, detail)
            return
        state = ReadState()
        try:
            lines = self._read_whole(entry, fh, state)
        except TraceFileTooLarge as exc:
            self._trace_failed(entry, st, retire, known, "trace_file_too_large", f"{name}: {exc}; nothing of it read")
            return
        except DecompressedTooLarge as exc:
            detail = f"{name}: {exc} (the bound is [ingest].max_decompressed_bytes); nothing of it read"
            self._trace_failed(entry, st, retire, known, "decompressed_too_large", detail)
            return
        except READ_ERRORS as exc:
            detail = f"{name}: unreadable: {exc}; a trace file is converted whole, so nothing of it was read"
            self._trace_failed(entry, st, retire, known, "file_unreadable", detail)
            return
        document = len(lines) > 1 and not is_json_value(lines[0].raw)  # one JSON document over several lines
        if adapter is None:
            doc = whole_document(lines)  # one JSON document (e.g. a pretty-printed API page): one line
            adapter = detect(doc.raw, doc.raw[:HEAD_BYTES]) if doc is not None else None
            if doc is None or adapter is None:
                detail = (
                    f"{name}: a *.json file must be of a trace format, and it is of none "
                    f"({', '.join(registry())}; citegate-log/1 files are named *.jsonl)"
                )
                self._trace_failed(entry, st, retire, known, "unknown_trace_format", detail)
                return
            lines, document = [doc], True
        row: dict | None
        if not document:
            fid = trace_id(adapter.name, fingerprint)
            row = self.ledger.by_id.get(fid)
            if row is not None and not self._prefix_matches(entry, fh, row):
                if (row["landing"], row["file_name"]) == (self.landing, name):
                    self._changed(entry, st, row, PrefixChanged("its first bytes differ from those converted before"))
                    return
                # the same first line as a file converted elsewhere, different bytes after it: a file of its own
                fid = trace_id(adapter.name, distinct_id(fingerprint, self.landing, name))
                row = self.ledger.by_id.get(fid)
                if row is not None and not self._prefix_matches(entry, fh, row):
                    self._changed(entry, st, row, PrefixChanged("its first bytes differ from those converted before"))
                    return
        else:
            # one JSON document over several lines (its first line, `{`, is every such file's): known by all of
            # its bytes, so a new document under an old name is a new file
            fid = trace_id(adapter.name, "doc:" + state.digest())
            row = self.ledger.by_id.get(fid)
        if any(pending.file_id == fid for pending in self._in_flight()):
            self.flush()  # the same file under a second name in this run: count what the first one gave first
            row = self.ledger.by_id.get(fid)
        if known is not None and known["file_id"] != fid:
            retire.append(known["file_id"])  # a waiting or failed row of this name, or a document it held before
        before = row["bytes_consumed"] if row is not None else 0
        if row is not None and row["status"] == "complete" and state.consumed == before:
            # the same bytes (touched, renamed or copied): nothing new
            self._event(
                None,
                {
                    **row,
                    "landing": self.landing,
                    "file_name": name,
                    "size_bytes": st.st_size,
                    "mtime_ns": st.st_mtime_ns,
                    "finished_at": self.now,
                    "replaces": sorted(set(retire) - {fid}),
                },
            )
            return
        conv = convert_lines(adapter, lines, self.config.adapters.settings(), self._partners(adapter.name, name))
        if conv.waiting is not None:
            self._hold(entry, st, retire, known, f"{name}: {conv.waiting}; converted when it settles (or --final)")
            return
        if conv.error is not None:
            self._trace_failed(entry, st, retire, row, "adapter_failed", f"{name}: {conv.error}; nothing of it read")
            return
        f = self._file(entry, st, fid, row, sorted(set(retire) - {fid}))
        f.state = state
        skip = f.tally.lines_read  # items given on an earlier run (all of them, or up to a crash)
        self.summary.files_read += 1
        self.summary.trace_files += 1
        self.summary.lines_read += sum(1 for line in lines if line.end > before)
        self.summary.bytes_read += state.consumed - before
        by_no = {line.no: line for line in lines}
        fresh = conv.items[skip:]
        self.summary.calls_converted += len(fresh)
        calls_on = Counter(item.line_no for item in conv.items if isinstance(item, Call))
        for item in fresh:
            self._add(f, self._trace_item(item, by_no[item.line_no], calls_on[item.line_no]))
        f.status = "complete"
        f.detail = conv.describe()
        if skip > len(conv.items):
            f.detail += f"; it gave {skip} items before and {len(conv.items)} now: nothing new taken"
        self.files[id(f)] = f
        self._ledger_row(f)

    def _partners(self, format: str, name: str) -> Partners | None:
        """The landing folder's other files of a format whose calls take pieces from other files (read once per
        run, when a file of it is converted)."""
        if self.partners is None:
            self.partners = landing_partners(self.root, self.config, final=self.final)
        found = self.partners.get(format)
        return without(found, name) if found is not None else None

    def _trace_item(self, item: Call | LineReject, source: Line, calls_on_line: int) -> _Item:
        """An item as a batch takes it: a call's record as a line-equivalent, or a reject with what its row keeps:
        the item's own part of the line, never another call's (a whole line only when nothing else is on it)."""
        if isinstance(item, Call):
            lines = item.lines
            if item.reason is None:
                raw, problem = record_line(item)
                if raw is not None:
                    return _Item(
                        Line(item.line_no, raw, source.end, len(raw)), None, item.request_id, lines, item.files
                    )
                reject = Reject(ADAPTER_ERROR, problem or "unconvertible record")
            else:
                reject = Reject(item.reason or ADAPTER_ERROR, item.detail or "")
            kept = _own_part(item.part, source, calls_on_line)
            return _Item(kept, reject, item.request_id, lines, item.files)
        return _Item(_own_part(item.part, source, 0), Reject(item.reason, item.detail))

    def _read_whole(self, entry: Entry, fh: BinaryIO, state: ReadState) -> list[Line]:
        """Every line of the file with its last one, bounded by [adapters].max_file_bytes of content."""
        fh.seek(0)
        bound = self.config.adapters.max_file_bytes
        lines: list[Line] = []
        total = 0
        for line in read_lines(
            open_stream(fh, entry.compressed),
            state,
            max_line_bytes=self.limits.max_line_bytes,
            max_inflated_bytes=self.limits.max_decompressed_bytes if entry.compressed else None,
            final=True,
        ):
            total += line.length
            if total > bound:
                raise TraceFileTooLarge(
                    f"a trace file is read whole, and this one holds more than {bound:,} bytes "
                    "(the bound is [adapters].max_file_bytes)"
                )
            lines.append(line)
        return lines

    def _prefix_matches(self, entry: Entry, fh: BinaryIO, row: dict) -> bool:
        """Are the bytes converted before (row) still the file's first bytes?"""
        nbytes = row["bytes_consumed"] or 0
        if nbytes == 0:
            return True
        fh.seek(0)
        try:
            return prefix_matches(open_stream(fh, entry.compressed), nbytes, row["file_sha256"] or "")
        except READ_ERRORS:
            return False

    def _hold(self, entry: Entry, st: os.stat_result, retire: list[str], row: dict | None, detail: str) -> None:
        """A trace file not settled yet: waiting, with what an earlier run converted of it kept."""
        self.summary.files_waiting += 1
        self.summary.bytes_held += st.st_size - (row["bytes_consumed"] if row else 0)
        if row is None:
            row = ledger_row(
                file_id=path_id(self.landing, entry.name),
                landing=self.landing,
                name=entry.name,
                status="waiting",
                now=self.now,
            )
            prior = self.ledger.by_id.get(row["file_id"])
            if prior is not None and (prior["status"], prior["size_bytes"], prior["mtime_ns"]) == (
                "waiting",
                st.st_size,
                st.st_mtime_ns,
            ):
                return
            retire = [i for i in retire if i != row["file_id"]]
        self._event(
            None,
            {
                **row,
                "landing": self.landing,
                "file_name": entry.name,
                "size_bytes": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "status": "waiting",
                "detail": detail,
                "finished_at": self.now,
                "replaces": sorted(set(retire)),
            },
        )

    def _trace_failed(
        self, entry: Entry, st: os.stat_result, retire: list[str], row: dict | None, reason: str, detail: str
    ) -> None:
        """A trace file that cannot be converted at this size: one reject row, looked at again when it changes; what
        an earlier run took of it stays counted."""
        if row is None:
            row = ledger_row(
                file_id=path_id(self.landing, entry.name),
                landing=self.landing,
                name=entry.name,
                status="failed",
                now=self.now,
            )
            retire = [i for i in retire if i != row["file_id"]]
        prior = self.ledger.by_id.get(row["file_id"])
        if prior is not None and (prior["status"], prior["size_bytes"], prior["mtime_ns"], prior["detail"]) == (
            "failed",
            st.st_size,
            st.st_mtime_ns,
            detail,
        ):
            return
        self._event(
            self._file_reject(entry.name, reason, detail),
            {
                **row,
                "landing": self.landing,
                "file_name": entry.name,
                "size_bytes": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "status": "failed",
                "detail": detail,
                "finished_at": self.now,
                "replaces": sorted(set(retire)),
            },
        )

    def _file(self, entry: Entry, st: os.stat_result, file_id: str, row: dict | None, retire: list[str]) -> _File:
        f = _File(
            entry, file_id, st.st_size, st.st_mtime_ns, row["first_seen_at"] if row else None, retire=list(retire)
        )
        if row is not None:
            f.tally = FileTally(
                row["lines_read"], row["records_ingested"], row["records_rejected"], row["answers_rejected"]
            )
            f.days = set(row["days"] or ())
        return f

    def _consume(
        self,
        f: _File,
        fh: BinaryIO,
        settled: bool,
        *,
        verify: tuple[int, int, str] | None = None,
        skip_lines: int = 0,
    ) -> None:
        """Read the file's new complete lines into batches; PrefixChanged leaves nothing behind."""
        fh.seek(0)
        compressed = f.entry.compressed
        self.parser.expect(f.size - (verify[0] if verify else 0))  # a compressed file: its size on disk, a lower bound
        lines = read_lines(
            open_stream(fh, compressed),
            f.state,
            max_line_bytes=self.limits.max_line_bytes,
            max_inflated_bytes=self.limits.max_decompressed_bytes if compressed else None,
            final=settled or compressed,  # a gzip stream read to its proper end was closed by its writer
            verify=verify,
        )
        name = f.entry.name
        self.summary.files_read += 1
        try:
            first = next(lines, None)  # a changed prefix raises here, before anything of the file is batched
            if first is not None:
                self._add(f, first, skip_lines)
                for line in lines:
                    self._add(f, line, skip_lines)
        except DecompressedTooLarge as exc:
            f.status, f.detail = (
                "failed",
                f"{name}: {exc} (the bound is [ingest].max_decompressed_bytes); lines before that point are kept",
            )
            self._fault(f, "decompressed_too_large")
        except READ_ERRORS as exc:
            where = f"after line {f.state.lines}" if f.state.lines else "from its start"
            if compressed and not settled:
                f.status, f.detail = (
                    "waiting",
                    f"{name}: its compressed stream ends {where} (still being copied?); read on when it changes",
                )
            else:
                f.status, f.detail = "failed", f"{name}: unreadable {where}: {exc}; read again when the file changes"
                self._fault(f, "file_unreadable")
        else:
            if f.state.held_bytes:
                f.status = "waiting"
                f.detail = (
                    f"{name}: its last line ({f.state.held_bytes:,} bytes) has no end yet; held back until it ends "
                    "or the file has not changed for [ingest].settle_seconds (or `citegate run --final`)"
                )
            else:
                f.status, f.detail = "complete", None
        if f.status == "waiting":
            self.summary.files_waiting += 1
            self.summary.bytes_held += f.state.held_bytes
        self.files[id(f)] = f
        self._ledger_row(f)  # known at once: a second name for the same file, later in this run, reads on from here

    def _add(self, f: _File, line: Line | _Item, skip_lines: int = 0) -> None:
        if isinstance(line, Line) and line.no <= skip_lines:
            return
        self.lines.append((f, line))
        self.nbytes += line.length if isinstance(line, Line) else line.line.length
        self.files[id(f)] = f
        if len(self.lines) >= self.batch_lines or self.nbytes >= BATCH_BYTES:
            self.commit()

    def _unidentified(
        self, entry: Entry, st: os.stat_result, retire: list[str], settled: bool, error: BaseException | None
    ) -> None:
        """No complete first line yet (an empty file, or one being written), or a .gz that cannot be opened."""
        name, pid = entry.name, path_id(self.landing, entry.name)
        if error is None and not settled:
            status, detail = "waiting", f"{name}: no complete line yet; read once its first line ends"
        elif error is None:
            status, detail = "complete", None  # settled and empty
        elif not settled:
            status, detail = "waiting", f"{name}: cannot be read yet ({error}); read when it changes"
        else:
            status, detail = "failed", f"{name}: unreadable from its start: {error}; read again when the file changes"
        prior = self.ledger.by_id.get(pid)
        if prior is not None and (prior["status"], prior["size_bytes"], prior["mtime_ns"]) == (
            status,
            st.st_size,
            st.st_mtime_ns,
        ):
            return
        if status == "waiting":
            self.summary.files_waiting += 1
            self.summary.bytes_held += st.st_size
        reject = self._file_reject(name, "file_unreadable", detail) if status == "failed" else None
        self._event(
            reject,
            ledger_row(
                file_id=pid,
                landing=self.landing,
                name=name,
                status=status,
                now=self.now,
                size=st.st_size,
                mtime_ns=st.st_mtime_ns,
                detail=detail,
                replaces=retire,
            ),
        )

    def _changed(self, entry: Entry, st: os.stat_result, row: dict, exc: PrefixChanged) -> None:
        """Rewritten in place after it was read: reported once (per change), never re-read."""
        detail = f"{entry.name}: content changed after ingestion ({exc}); not re-read"
        reject = self._file_reject(entry.name, "file_changed_after_ingest", detail)
        self._event(
            reject,
            {
                **row,
                "size_bytes": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "status": "failed",
                "detail": detail,
                "finished_at": self.now,
                "replaces": [],
            },
        )

    def _fault(self, f: _File, reason: str) -> None:
        self.events.append((self._file_reject(f.entry.name, reason, f.detail), None))

    def _file_reject(self, name: str, reason: str, detail: str | None) -> dict:
        return {
            "source_file": name,
            "line_no": 0,
            "day": None,
            "request_id": None,
            "reason": reason,
            "detail": detail,
            "raw_line": None,
            "rejected_at": self.now,
        }

    def _event(self, reject: dict | None, row: dict) -> None:
        self.events.append((reject, row))
        self.ledger.remember(row)

    def _ledger_row(self, f: _File) -> dict:
        return self._state_row(f, _FileState.of(f))

    # -- batches ---------------------------------------------------------------------------------
    def commit(self) -> None:
        """Hand the batched lines to the parser (a worker, or this process); finish the batches parsed by now."""
        if not (self.lines or self.files or self.events):
            return
        lines, files, events = self.lines, self.files, self.events
        self.lines, self.nbytes, self.files, self.events = [], 0, {}, []
        work = [
            BatchLine(key, (f.entry.name, line.no), line, None, None)
            if isinstance(line, Line)
            else BatchLine(key, (f.entry.name, line.line.no), line.line, line.reject, line.request_id)
            for key, (f, line) in enumerate(lines)
        ]
        nbytes = sum(b.line.length for b in work)
        parsed = self.parser.submit(work, self.now, nbytes, STORE_RETRIEVED_TEXT_ONCE)
        self.inflight.append(_Batch(lines, [(f, _FileState.of(f)) for f in files.values()], events, parsed))
        while self.inflight and (len(self.inflight) > self.parser.depth or self.inflight[0].parsed.done()):
            self._finish(self.inflight.popleft())

    def flush(self) -> None:
        """Commit, and finish every batch in flight: the ledger and counts are then those of every line read."""
        self.commit()
        while self.inflight:
            self._finish(self.inflight.popleft())

    def _in_flight(self) -> Iterator[_File]:
        yield from self.files.values()
        for batch in self.inflight:
            for f, _ in batch.files:
                yield f

    def _finish(self, batch: _Batch) -> None:
        """A parsed batch, in commit order: drop the known requests, count, and hand it to the writer."""
        lines = batch.lines
        relations = self._relations(lines, batch.parsed.result())
        rows = [row for _, row in batch.events if row is not None] + [
            self._state_row(f, state) for f, state in batch.files
        ]
        latest: dict[str, dict] = {}
        for row in rows:  # one row per file: its latest state, superseding all its earlier names
            earlier = latest.get(row["file_id"])
            latest[row["file_id"]] = {
                **row,
                "replaces": sorted({*row["replaces"], *(earlier["replaces"] if earlier else ())}),
            }
        ledger = list(latest.values())
        extra = [reject for reject, _ in batch.events if reject is not None]
        if extra:
            relations["batch_rejects"] = pl.concat(
                [relations["batch_rejects"], pl.DataFrame(extra, schema=REJECT_SCHEMA)]
            )
        longest = max((line.length if isinstance(line, Line) else line.line.length for _, line in lines), default=0)
        self.writer.submit(relations, ledger, longest)
        if self.progress and lines:
            last = lines[-1][0]
            self.progress(last.entry.name, last.state.lines, self.summary.bytes_read)

    def _state_row(self, f: _File, state: _FileState) -> dict:
        """The file's ledger row as of the batch's commit, with its counts through this batch."""
        row = ledger_row(
            file_id=f.file_id,
            landing=self.landing,
            name=f.entry.name,
            status=state.status,
            now=self.now,
            first_seen=state.first_seen,
            sha256=state.sha256,
            size=f.size,
            mtime_ns=f.mtime_ns,
            consumed=state.consumed,
            tally=f.tally,
            detail=state.detail,
            days=f.days,
            replaces=state.retire,
        )
        self.ledger.remember(row)
        return row

    def _relations(self, lines: list[tuple[_File, Line | _Item]], parsed: ParsedBatch) -> dict[str, pl.DataFrame]:
        """One parsed batch of lines (from one file or many) and of the items of converted trace files (each counts
        as one line: the ledger's lines_read of a trace file counts items), its known requests dropped in order."""
        owner = {key: f for key, (f, _) in enumerate(lines)}
        origin = {
            key: (f.entry.name, line.no if isinstance(line, Line) else line.line.no)
            for key, (f, line) in enumerate(lines)
        }
        plain = [line for _, line in lines if isinstance(line, Line)]
        # a rejected line of a forgotten request: its reject row keeps no text, as a refused copy's does below
        forgotten = self.known.forgotten([r["request_id"] for r in parsed.rejects if r["request_id"] is not None])
        rejects = [{**r, "raw_line": None} if r["request_id"] in forgotten else r for r in parsed.rejects]
        kept, duplicates, conflicts = self._drop_known_requests(parsed.claims, origin)
        for claim, why, text_removed in duplicates:
            entry = lines[claim.key][1]
            # a forgotten or retained request's line again: refused, and its text is not kept in the reject row
            text = None if text_removed else valid_line_text(entry if isinstance(entry, Line) else entry.line)
            rejects.append(reject_row(claim.key, why, text, claim))
        kept_keys = {claim.key for claim in kept}
        broken = [r for r in parsed.broken if r["key"] in kept_keys]
        rejects.extend(broken)
        left_out = {r["key"] for r in broken}
        kept = [claim for claim in kept if claim.key not in left_out]
        relations = dict(parsed.relations)
        if duplicates:  # the frames hold each request id's first copy in the batch: keep those accepted here
            accepted = [claim.request_id for claim in kept]
            written = relations["batch_prompts"]
            relations = {rel: df.filter(pl.col("request_id").is_in(accepted)) for rel, df in relations.items()}
            if self.text_folder is not None:  # no file keeps a refused copy's text
                relations["batch_prompts"] = keep_only(self.text_folder, relations["batch_prompts"])
                remove_files(self.text_folder, written["text_file"].drop_nulls().unique().to_list())
        answer_rejects = relations["batch_answer_rejects"]
        # per-file counts, so each file's ledger row balances: lines read = records ingested + records rejected
        for f, _ in lines:
            f.tally.lines_read += 1
        for claim in kept:
            owner[claim.key].tally.records_ingested += 1
            owner[claim.key].days.add(claim.day)
        for r in rejects:
            owner[r["key"]].tally.records_rejected += 1
        owner_at = {origin[key]: f for key, f in owner.items()}
        for source, line_no in answer_rejects.select("source_file", "source_line").iter_rows():
            owner_at[(source, line_no)].tally.answers_rejected += 1
        summary = self.summary
        summary.lines_read += len(plain)  # a trace file's source lines are counted where it is read
        summary.bytes_read += sum(line.length for line in plain)
        summary.records_ingested += len(kept)
        summary.records_rejected += len(rejects)
        summary.answers_rejected += answer_rejects.height
        summary.days.update(claim.day for claim in kept)
        reject_rows = [
            {
                **{k: v for k, v in r.items() if k != "key"},
                "source_file": origin[r["key"]][0],
                "line_no": origin[r["key"]][1],
                "rejected_at": self.now,
            }
            for r in rejects
        ]
        relations["batch_rejects"] = (
            pl.DataFrame(reject_rows, schema=REJECT_SCHEMA) if reject_rows else pl.DataFrame(schema=REJECT_SCHEMA)
        )
        relations["batch_conflicts"] = (
            pl.DataFrame(conflicts, schema=CONFLICT_SCHEMA, orient="row")
            if conflicts
            else pl.DataFrame(schema=CONFLICT_SCHEMA)
        )
        read_from = [
            (item.request_id, f.entry.name, no)
            for f, item in lines
            if isinstance(item, _Item) and item.request_id is not None
            for no in item.other_lines
        ] + [
            (item.request_id, other, no)
            for _, item in lines
            if isinstance(item, _Item) and item.request_id is not None
            for other, no in item.other_files
        ]
        relations["batch_source_lines"] = pl.DataFrame(read_from, schema=SOURCE_LINES_SCHEMA, orient="row")
        return relations

    def _drop_known_requests(
        self, claims: list[Claim], origin: dict[int, tuple[str, int]]
    ) -> tuple[list[Claim], list[tuple[Claim, Reject, bool]], list[tuple]]:
        """The prompt log is immutable: a request id seen before is refused, and a different prompt under it is a
        conflict. Seen before = committed in the warehouse, or earlier in this run (possibly still being written)."""
        seen = self.run_seen
        unknown = {claim.request_id for claim in claims} - set(seen)
        for rid, sha, source, text_removed in self.known.lookup(list(unknown)):
            seen[rid] = (sha, source, text_removed)
        kept: list[Claim] = []
        refused: list[tuple[Claim, Reject, bool]] = []
        conflicts: list[tuple] = []
        for rec in claims:
            name, line_no = origin[rec.key]
            prior = seen.get(rec.request_id)
            if prior is None:
                seen[rec.request_id] = (rec.prompt_sha256, f"{name}:{line_no}", False)
                kept.append(rec)
                continue
            sha, source, text_removed = prior
            if sha == rec.prompt_sha256:
                why = Reject(
                    "duplicate_request_id",
                    f"request_id {rec.request_id!r} already ingested from {source} with the same prompt",
                )
            else:
                why = Reject(
                    "request_id_conflict",
                    f"request_id {rec.request_id!r} already ingested from {source} with a different prompt; "
                    "the first is kept",
                )
                conflicts.append((rec.request_id, rec.day, sha, rec.prompt_sha256, source, name, line_no, self.now))
            refused.append((rec, why, text_removed))
        return kept, refused, conflicts


def _own_part(part: str | None, source: Line, calls_on_line: int) -> Line:
    """What a trace item's reject row keeps, as the line it is given with: the adapter's part (the item's own
    spans or records), else the source line when it holds no other call, else a note that it was not kept."""
    if part is None and calls_on_line > 1:
        part = json.dumps(
            {"line": source.no, "not_kept": f"the line holds {calls_on_line} calls; it is not kept for one of them"}
        )
    if part is None:
        return source
    raw = part.encode("utf-8", "surrogatepass")
    return Line(source.no, raw, source.end, len(raw))


def _legacy_prefix_matches(fh: BinaryIO, legacy: dict) -> bool:
    """A ledger row of a release before file identities: sha256 of the file's first size_bytes raw bytes."""
    size, expected = legacy["size_bytes"], legacy["file_sha256"]
    if size is None or expected is None:
        return False
    fh.seek(0)
    digest, remaining = hashlib.sha256(), size
    while remaining > 0:
        block = fh.read(min(1 << 20, remaining))
        if not block:
            return False
        digest.update(block)
        remaining -= len(block)
    return digest.hexdigest() == expected
