"""Landing folder → warehouse: stream the new bytes of each log file in batches, validate, normalize, append.

The unit of progress is a landing file, known by its content (lib/ingest/ledger.py). The ledger records, per file,
the bytes and lines consumed and the sha256 of exactly those bytes, in the same transaction as the rows, so
re-ingesting is a no-op, a killed run resumes where it stopped, a rotated file is read on under its new name,
and a file that is still being written gives up only its complete lines. Batches span files, so a folder of
many small files costs a few transactions, not one per file (lib/ingest/run_batches.py). Batches are parsed and
normalized in worker processes on a large run ([ingest] workers, lib/ingest/workers.py) and written in the order
they were read (lib/ingest/writer.py).

A file in a trace format (lib/ingest/adapters, docs/trace-formats.md) is detected by its first line and converted
as a whole once it has settled (lib/ingest/trace_reading.py).
"""

from __future__ import annotations

import hashlib
import os
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

import duckdb

from citegate_assets.lib.core.lines import (
    READ_ERRORS,
    DecompressedTooLarge,
    PrefixChanged,
    first_line_fingerprint,
    open_stream,
    read_lines,
)
from citegate_assets.lib.core.timestamps import utc_now
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
from citegate_assets.lib.ingest.ledger import DONE, FileTally, distinct_id, entry_id, ledger_row, path_id
from citegate_assets.lib.ingest.run_batches import BATCH_LINES, IngestSummary, Progress, _File
from citegate_assets.lib.ingest.settings import IngestSettings as Config
from citegate_assets.lib.ingest.trace_reading import TraceReading
from citegate_assets.lib.ingest.writer import INGEST_MEMORY_LIMIT_BYTES, IngestWriteError, ingest_settings
from citegate_assets.lib.storage.text_store import sweep

__all__ = ["LOG_SUFFIXES", "IngestSummary", "IngestWriteError", "ingest_landing"]


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
    with ingest_settings(con, INGEST_MEMORY_LIMIT_BYTES):  # around the writer too: it sets the limit per batch
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


class _Run(TraceReading):
    """One ingest run: each landing entry read, a log file line by line (a trace file: TraceReading), into the
    batches of RunBatches."""

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
