"""Landing folder → warehouse: stream each new log file in batches, validate, normalize, append.

The unit of progress is the landing file. The ledger (`ingested_files`) records, per file, the lines
already committed, in the same transaction as the rows, so re-ingesting is a no-op and a killed run
resumes where it stopped. A file whose content changed after ingestion is reported, not re-read.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import duckdb
import polars as pl

from .batch import build_frames
from .containers import PromptDecodeError, decode_prompt
from .config import Config
from .records import Record, Reject, parse_line
from .warehouse import query, run_script

LOG_SUFFIXES = (".jsonl", ".jsonl.gz")
BATCH_LINES = 2000
BATCH_BYTES = 16 * 1024 * 1024  # the working set of a batch is ~20x its bytes: this keeps ingest under ~0.5 GB
MAX_LINE_BYTES = 32 * 1024 * 1024
RAW_KEEP_BYTES = 64 * 1024  # what a reject row keeps of an oversized line
BOM = b"\xef\xbb\xbf"

REJECT_SCHEMA = {
    "source_file": pl.String,
    "line_no": pl.Int64,
    "day": pl.Date,
    "request_id": pl.String,
    "reason": pl.String,
    "detail": pl.String,
    "raw_line": pl.String,
    "rejected_at": pl.Datetime("us", "UTC"),
}
CONFLICT_SCHEMA = {
    "request_id": pl.String,
    "day": pl.Date,
    "existing_sha256": pl.String,
    "conflicting_sha256": pl.String,
    "existing_source": pl.String,
    "source_file": pl.String,
    "source_line": pl.Int64,
    "recorded_at": pl.Datetime("us", "UTC"),
}


@dataclass
class FileTally:
    lines_read: int = 0
    records_ingested: int = 0
    records_rejected: int = 0
    answers_rejected: int = 0


@dataclass
class IngestSummary:
    files_seen: int = 0
    files_read: int = 0
    lines_read: int = 0
    records_ingested: int = 0
    records_rejected: int = 0
    answers_rejected: int = 0
    bytes_read: int = 0
    days: set[date] = field(default_factory=set)


Progress = Callable[[str, int, int], None]  # (file name, lines read so far, bytes read so far)


class BatchWriter:
    """Writes prepared batches on a second connection in a worker thread, one at a time and in order,
    while the main thread parses and normalizes the next batch (DuckDB releases the GIL)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self._cursor = con.cursor()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="citegate-ingest-writer")
        self._pending: Future | None = None

    def submit(self, relations: dict[str, pl.DataFrame], ledger: dict) -> None:
        self.drain()
        self._pending = self._pool.submit(_write_batch, self._cursor, relations, ledger)

    def drain(self) -> None:
        """Wait for the batch in flight; its error, if any, is raised here."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def close(self) -> None:
        try:
            self.drain()
        finally:
            self._pool.shutdown(wait=True)
            self._cursor.close()


def _write_batch(cursor: duckdb.DuckDBPyConnection, relations: dict[str, pl.DataFrame], ledger: dict) -> None:
    cursor.execute("begin transaction")
    try:
        for rel, df in relations.items():
            cursor.register(rel, df.to_arrow())
        run_script(cursor, "ingest/insert_batch")
        run_script(cursor, "ingest/ledger_upsert", ledger)
        cursor.execute("commit")
    except BaseException:
        cursor.execute("rollback")
        raise
    finally:
        for rel in relations:
            cursor.unregister(rel)


def ingest_landing(
    con: duckdb.DuckDBPyConnection,
    landing: str | os.PathLike,
    config: Config,
    *,
    now: datetime | None = None,
    progress: Progress | None = None,
    batch_lines: int = BATCH_LINES,
) -> IngestSummary:
    """Ingest every new or grown log file in the landing folder. Never raises on bad input."""
    now = now or datetime.now(timezone.utc)
    landing = Path(landing)
    if not landing.is_dir():
        raise FileNotFoundError(f"{landing}: landing folder not found")
    summary = IngestSummary()
    writer = BatchWriter(con)
    run_seen: dict[str, tuple[str, str]] = {}  # request ids of this run, committed or still in flight
    try:
        for entry in sorted(landing.iterdir(), key=lambda p: p.name):
            if entry.name.startswith("."):
                continue  # editor and OS droppings (.DS_Store, .swp) are not logs
            summary.files_seen += 1
            _ingest_entry(con, writer, run_seen, entry, config, now, summary, progress, batch_lines)
            writer.drain()
    finally:
        writer.close()
    return summary


def _ingest_entry(con, writer, run_seen, path: Path, config, now, summary, progress, batch_lines) -> None:
    name = path.name
    ledger = _ledger_row(con, name)
    is_log = name.endswith(LOG_SUFFIXES)
    if not is_log or not path.is_file():
        if ledger is None:  # report once, then remember it was skipped
            reason = "not_a_file" if path.is_dir() or not path.is_file() else "not_a_log_file"
            detail = f"{name}: not a regular file" if reason == "not_a_file" else f"{name}: not *.jsonl or *.jsonl.gz"
            _skip_file(con, name, reason, detail, now)
        return
    size = path.stat().st_size
    if ledger is not None and ledger["status"] in ("complete", "failed") and ledger["size_bytes"] == size:
        return
    sha = _file_sha256(path)
    start_line, tally, first_seen = 0, FileTally(), now
    if ledger is not None:
        first_seen = ledger["first_seen_at"]
        resumable = ledger["file_sha256"] == sha or (
            not name.endswith(".gz") and size > ledger["size_bytes"] and _file_sha256(path, ledger["size_bytes"]) == ledger["file_sha256"]
        )
        if ledger["file_sha256"] == sha and ledger["status"] in ("complete", "failed"):
            return
        if not resumable:
            if ledger["detail"] != f"changed to {sha}":
                _file_changed(con, name, ledger, sha, now)
            return
        start_line = ledger["lines_read"]
        tally = FileTally(ledger["lines_read"], ledger["records_ingested"], ledger["records_rejected"], ledger["answers_rejected"])
    summary.files_read += 1
    state = dict(file_name=name, file_sha256=sha, size_bytes=size, first_seen_at=first_seen)
    batch: list[tuple[int, bytes]] = []
    batch_bytes = 0
    try:
        for line_no, raw in _lines(path, start_line):
            batch.append((line_no, raw))
            batch_bytes += len(raw)
            summary.bytes_read += len(raw)
            if len(batch) >= batch_lines or batch_bytes >= BATCH_BYTES:
                _commit_batch(con, writer, run_seen, batch, config, now, state, tally, summary, "partial", None)
                batch, batch_bytes = [], 0
                if progress:
                    progress(name, tally.lines_read, summary.bytes_read)
    except (EOFError, OSError, zlib.error) as exc:
        # a truncated or corrupt .gz: keep every line read before the fault, reject the rest of the file
        failed_line = (batch[-1][0] if batch else tally.lines_read) + 1
        # a whole-file row (line 0): the lines before the fault are ingested, the rest cannot be read
        fault = {"line_no": 0, "reason": "file_unreadable", "detail": f"{name}: unreadable from line {failed_line} on: {exc}"}
        _commit_batch(con, writer, run_seen, batch, config, now, state, tally, summary, "failed", fault)
        return
    _commit_batch(con, writer, run_seen, batch, config, now, state, tally, summary, "complete", None)
    if progress:
        progress(name, tally.lines_read, summary.bytes_read)


def _lines(path: Path, skip: int) -> Iterator[tuple[int, bytes]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            if line_no > skip:
                yield line_no, raw


def _commit_batch(con, writer, run_seen, batch, config, now, state, tally: FileTally, summary: IngestSummary, status, fault) -> None:
    name = state["file_name"]
    rejects: list[dict] = []
    raw_by_line: dict[int, str] = {}
    items: list[tuple[int, Record]] = []
    for line_no, raw in batch:
        result = _parse(raw, line_no, now)
        if isinstance(result[0], Reject):
            reject, text = result
            rejects.append(_reject(line_no, reject, text))
            continue
        text, rec = result
        raw_by_line[line_no] = text
        items.append((line_no, rec))
    # decode first: a record whose prompt cannot be read must not claim its request id
    decoded: dict[int, list] = {}
    for line_no, rec in items:
        try:
            decoded[line_no] = decode_prompt(rec.prompt, rec.prompt_encoding)
        except PromptDecodeError as exc:
            rejects.append(_reject(line_no, Reject("prompt_undecodable", str(exc)), raw_by_line[line_no], rec))
    items = [(n, rec) for n, rec in items if n in decoded]
    items, dup_rejects, conflicts = _drop_known_requests(con, run_seen, items, raw_by_line, name, now)
    rejects.extend(dup_rejects)
    frames, broken = _frames_isolating_failures(items, config, name, now, decoded)
    for line_no, rec, exc in broken:  # never expected; one odd record must not stop the landing folder
        rejects.append(_reject(line_no, Reject("unprocessable_record", f"{type(exc).__name__}: {exc}"[:500]), raw_by_line[line_no], rec))
    for r in frames.rejects:
        rejects.append({**r, "raw_line": raw_by_line[r["line_no"]]})
    dropped = {r["request_id"] for r in frames.rejects}
    if dropped:  # undecodable prompts: nothing of the record lands but its reject row
        items = [(n, rec) for n, rec in items if rec.request_id not in dropped]
    if fault:
        rejects.append({"line_no": fault["line_no"], "day": None, "request_id": None, "reason": fault["reason"], "detail": fault["detail"], "raw_line": None})
    tally.lines_read += len(batch)
    tally.records_ingested += frames.prompts.height
    tally.records_rejected += len(rejects) - (1 if fault else 0)
    tally.answers_rejected += frames.answer_rejects.height
    summary.lines_read += len(batch)
    summary.records_ingested += frames.prompts.height
    summary.records_rejected += len(rejects) - (1 if fault else 0)
    summary.answers_rejected += frames.answer_rejects.height
    summary.days.update(frames.prompts["day"].to_list())
    reject_df = pl.DataFrame(
        [{**r, "source_file": name, "rejected_at": now} for r in rejects], schema=REJECT_SCHEMA
    ) if rejects else pl.DataFrame(schema=REJECT_SCHEMA)
    conflict_df = pl.DataFrame(conflicts, schema=CONFLICT_SCHEMA, orient="row") if conflicts else pl.DataFrame(schema=CONFLICT_SCHEMA)
    relations = {
        "batch_prompts": frames.prompts,
        "batch_sections": frames.sections,
        "batch_retrievals": frames.retrievals,
        "batch_citations": frames.citations,
        "batch_answer_rejects": frames.answer_rejects,
        "batch_rejects": reject_df,
        "batch_conflicts": conflict_df,
    }
    ledger = {
        **state,
        "status": status,
        "lines_read": tally.lines_read,
        "records_ingested": tally.records_ingested,
        "records_rejected": tally.records_rejected,
        "answers_rejected": tally.answers_rejected,
        "detail": fault["detail"] if fault else None,
        "finished_at": now if status != "partial" else None,
    }
    writer.submit(relations, ledger)


def _frames_isolating_failures(items, config, name, now, decoded):
    """build_frames on the batch; if it raises, find the records that make it raise and leave them out."""
    try:
        return build_frames(items, config, name, now, decoded), []
    except Exception:  # noqa: BLE001 — isolate, then report each culprit as a reject row
        good, broken = [], []
        for item in items:
            try:
                build_frames([item], config, name, now, decoded)
                good.append(item)
            except Exception as exc:  # noqa: BLE001
                broken.append((item[0], item[1], exc))
        return build_frames(good, config, name, now, decoded), broken


def _parse(raw: bytes, line_no: int, now: datetime):
    """(text, record) for a valid line; (Reject, raw text) otherwise."""
    if line_no == 1 and raw.startswith(BOM):
        raw = raw[len(BOM):]  # a UTF-8 byte order mark is an encoding artifact, not content
    if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
        text = raw[:RAW_KEEP_BYTES].decode("utf-8", "backslashreplace")
        return Reject("line_too_long", f"line of {len(raw)} bytes exceeds {MAX_LINE_BYTES}; raw_line keeps the first {RAW_KEEP_BYTES}"), text
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Reject("invalid_utf8", f"not UTF-8 at byte {exc.start}"), raw.decode("utf-8", "backslashreplace")
    text = text.rstrip("\r\n")
    if "\x00" in text:
        return Reject("nul_byte", f"NUL byte at character {text.index(chr(0))}"), text.replace("\x00", "\\x00")
    result = parse_line(text, now)
    if isinstance(result, Reject):
        return result, text
    return text, result



def _reject(line_no: int, reject: Reject, raw_text: str, rec: Record | None = None) -> dict:
    return {
        "line_no": line_no,
        "day": rec.day if rec else None,
        "request_id": rec.request_id if rec else None,
        "reason": reject.reason,
        "detail": reject.detail,
        "raw_line": raw_text,
    }


def _drop_known_requests(con, run_seen, items, raw_by_line, name, now):
    """The prompt log is immutable: a request id seen before is refused, and a different prompt under it is a conflict.
    Seen before = committed in the warehouse, or earlier in this run (possibly still being written)."""
    seen = run_seen
    unknown = {rec.request_id for _, rec in items} - set(seen)
    if unknown:
        keys = pl.DataFrame({"request_id": list(unknown)})
        con.register("batch_keys", keys.to_arrow())
        try:
            for rid, sha, source in query(con, "ingest/existing_requests").fetchall():
                seen[rid] = (sha, source)
        finally:
            con.unregister("batch_keys")
    kept, rejects, conflicts = [], [], []
    for line_no, rec in items:
        prior = seen.get(rec.request_id)
        if prior is None:
            seen[rec.request_id] = (rec.prompt_sha256, f"{name}:{line_no}")
            kept.append((line_no, rec))
            continue
        sha, source = prior
        if sha == rec.prompt_sha256:
            reject = Reject("duplicate_request_id", f"request_id {rec.request_id!r} already ingested from {source} with the same prompt")
        else:
            reject = Reject("request_id_conflict", f"request_id {rec.request_id!r} already ingested from {source} with a different prompt; the first is kept")
            conflicts.append((rec.request_id, rec.day, sha, rec.prompt_sha256, source, name, line_no, now))
        rejects.append(_reject(line_no, reject, raw_by_line[line_no], rec))
    return kept, rejects, conflicts


def _ledger_row(con, name: str) -> dict | None:
    rel = con.sql("select * from ingested_files where file_name = $name", params={"name": name})
    rows = rel.fetchall()
    if not rows:
        return None
    return dict(zip(rel.columns, rows[0]))


def _skip_file(con, name: str, reason: str, detail: str, now: datetime) -> None:
    reject = pl.DataFrame(
        [{"source_file": name, "line_no": 0, "day": None, "request_id": None, "reason": reason, "detail": detail, "raw_line": None, "rejected_at": now}],
        schema=REJECT_SCHEMA,
    )
    _write_file_event(con, reject, dict(file_name=name, file_sha256=None, size_bytes=None, status="skipped", lines_read=0,
                                         records_ingested=0, records_rejected=0, answers_rejected=0, detail=detail,
                                         first_seen_at=now, finished_at=now))


def _file_changed(con, name: str, ledger: dict, sha: str, now: datetime) -> None:
    detail = f"{name}: content changed after ingestion (was {ledger['file_sha256'][:12]}, now {sha[:12]}); not re-read"
    reject = pl.DataFrame(
        [{"source_file": name, "line_no": 0, "day": None, "request_id": None, "reason": "file_changed_after_ingest", "detail": detail, "raw_line": None, "rejected_at": now}],
        schema=REJECT_SCHEMA,
    )
    _write_file_event(con, reject, {**ledger, "detail": f"changed to {sha}"})


def _write_file_event(con, reject: pl.DataFrame, ledger: dict) -> None:
    con.execute("begin transaction")
    try:
        con.register("batch_file_reject", reject.to_arrow())
        con.execute("insert into ingest_rejects by name select * from batch_file_reject")
        con.unregister("batch_file_reject")
        run_script(con, "ingest/ledger_upsert", ledger)
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise


def _file_sha256(path: Path, limit: int | None = None) -> str:
    digest = hashlib.sha256()
    remaining = limit
    with open(path, "rb") as fh:
        while True:
            want = 1 << 20 if remaining is None else min(1 << 20, remaining)
            if want == 0:
                break
            block = fh.read(want)
            if not block:
                break
            digest.update(block)
            if remaining is not None:
                remaining -= len(block)
    return digest.hexdigest()
