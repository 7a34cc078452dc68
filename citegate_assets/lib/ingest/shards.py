"""A day's ingest split across shard processes (`[ingest] shards = N`, `citegate run --shards N`).

The landing files are assigned to N shards by file identity (the ledger's: the sha256 of a file's first line, so a
renamed or rotated file stays on its shard; a file with no complete first line, or an entry that is not a file,
by its name). Each shard ingests its files exactly as lib/ingest/stream.py does, with the working warehouse's ledger as
it
was when the run started, but writes no DuckDB file: its batches' rows go to staging Delta tables under
`<lake>/_staging/` in its own commits, every row tagged with the shard run's id, then its ledger rows and its
claims (every valid record's request id, prompt hash, place and outcome), and last a marker row. Only marked shard
runs are ever read, so a killed shard's partial rows are never read; they are swept by the next collect.

The collect step, in the one process that writes the working warehouse, loads the marked shard runs' rows and
records the files in the ledger in one transaction. What a one-worker ingest decides across files is resolved there:
a request id is kept from its first copy in the one-worker ingest's order (landing file order, then the order
within a file), checked against the warehouse as well; a later copy is a duplicate_request_id or
request_id_conflict reject, its rows dropped and its file's counts corrected, exactly as one ingest would have.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb
import polars as pl

from citegate_assets.lib.core.lines import READ_ERRORS, Line, first_line_fingerprint, open_stream
from citegate_assets.lib.core.processes import spawned_pool
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.ingest.landing import Entry, landing_entries, landing_root, open_entry
from citegate_assets.lib.ingest.ledger import Ledger, ledger_frame
from citegate_assets.lib.ingest.records import Reject
from citegate_assets.lib.ingest.settings import IngestSettings as Config
from citegate_assets.lib.ingest.shard_collect import collect
from citegate_assets.lib.ingest.shard_staging import (
    CLAIM_SCHEMA,
    CLAIMS,
    LEDGER,
    MARKER_SCHEMA,
    MARKERS,
    SHARD_RUN,
    TABLES,
    Staging,
)
from citegate_assets.lib.ingest.stream import (
    BATCH_LINES,
    INGEST_MEMORY_LIMIT_BYTES,
    IngestSummary,
    _Run,
    ingest_settings,
)
from citegate_assets.lib.ingest.workers import (
    Claim,
    ParsedBatch,
    ParsePool,
    main_script_hidden,
    parse_process_environment,
    resolve_workers,
    valid_line_text,
)
from citegate_assets.lib.storage.lake_store import open_store
from citegate_assets.lib.storage.text_store import sweep
from citegate_assets.lib.storage.warehouse import ensure_schema

__all__ = ["ShardFailed", "ShardTask", "assign", "ingest_sharded", "run_shard", "shard_of"]


class ShardFailed(RuntimeError):
    """A shard process died (killed, out of memory): the run loads nothing; the next one reads its files again."""


FLUSH_BATCHES = 8  # a shard appends its rows every this many batches: a few commits, bounded memory


def shard_of(identity: str, shards: int) -> int:
    """The shard of a file identity: a stable hash, the same in every process and on every machine."""
    return int.from_bytes(hashlib.sha256(identity.encode("utf-8", "surrogatepass")).digest()[:8], "big") % shards


def file_identity(root: Path, entry: Entry, settled: bool) -> str:
    """What a file is known by in the ledger: its first line's fingerprint; its name when it has none yet."""
    if entry.reason:
        return "name:" + entry.name
    try:
        with open_entry(root, entry) as (fh, _st):
            fingerprint = first_line_fingerprint(open_stream(fh, entry.compressed), settled)
    except (*READ_ERRORS, OSError, ValueError, RuntimeError):
        fingerprint = None
    return fingerprint if fingerprint is not None else "name:" + entry.name


def assign(root: Path, entries: list[Entry], shards: int, final: bool, settle_seconds: float) -> list[list[str]]:
    """Each shard's landing entry names, in landing order. A file first seen without a complete line is assigned by
    name; once its first line is complete it moves to its identity's shard, which retires the name's row."""
    out: list[list[str]] = [[] for _ in range(shards)]
    for entry in entries:
        settled = final or _settled(root, entry, settle_seconds)
        out[shard_of(file_identity(root, entry, settled), shards)].append(entry.name)
    return out


def _settled(root: Path, entry: Entry, settle_seconds: float) -> bool:
    """As ingest decides it: an unterminated first line is a line only once the file has been quiet long enough."""
    try:
        return time.time() - (root / entry.name).stat().st_mtime >= settle_seconds
    except OSError:
        return False


# -- a shard ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardTask:
    shard_run: str
    shard: int
    shards: int
    landing: str
    names: tuple[str, ...]
    staging: str  # the staging root: a folder or s3://…/_staging
    config: Config
    now: datetime
    final: bool
    ledger_rows: tuple[dict, ...]
    workers: int | None = None
    batch_lines: int | None = None


class _ShardRun(_Run):
    """One ingest run over a shard's files: a one-worker ingest whose writer stages its batches (StagingWriter) and
    which records every claim's outcome for the collect step."""

    def __init__(self, con: duckdb.DuckDBPyConnection, task: ShardTask, stage: Staging, text_folder: Path):
        # the shards are the parallelism: a shard parses in its own process unless told otherwise ([ingest] workers
        # above 1, or workers given), which spares the parse workers' start-up and the frames' trip back
        workers = task.workers if task.workers is not None else max(1, task.config.ingest.workers)
        super().__init__(
            con,
            landing_root(task.landing),
            task.config,
            task.now,
            None,
            task.batch_lines or BATCH_LINES,
            task.final,
            workers,
        )
        self.ledger = Ledger()
        for row in task.ledger_rows:
            self.ledger.remember(dict(row))
        self.writer.close()
        self.writer = StagingWriter(stage, task.shard_run, self)  # type: ignore[assignment]
        # the parse step writes the prompt text files as ingest does, into the shard's staging folder
        self.text_folder = text_folder
        self.parser.close()
        self.parser = ParsePool(task.config, resolve_workers(workers), text_folder)
        self.claims: list[dict] = []
        self._lines: list = []
        self._broken: set[int] = set()

    def _relations(self, lines: list, parsed: ParsedBatch) -> dict[str, pl.DataFrame]:
        self._lines = lines  # the batch's lines, for the text of each kept copy
        self._broken = {r["key"] for r in parsed.broken}  # first copies whose frames failed: they claim all the same
        return super()._relations(lines, parsed)

    def _drop_known_requests(
        self, claims: list[Claim], origin: dict[int, tuple[str, int]]
    ) -> tuple[list[Claim], list[tuple[Claim, Reject, bool]], list[tuple]]:
        kept, refused, conflicts = super()._drop_known_requests(claims, origin)
        kept_keys = {c.key for c in kept}
        for c in claims:
            name, line_no = origin[c.key]
            entry = self._lines[c.key][1]
            # a trace item's line is built, not read: kept for its reject row should a copy elsewhere come first
            # (a log line is read again from its file, in that rare case)
            raw = valid_line_text(entry.line) if c.key in kept_keys and not isinstance(entry, Line) else None
            self.claims.append(
                {
                    "seq": len(self.claims),
                    "request_id": c.request_id,
                    "prompt_sha256": c.prompt_sha256,
                    "day": c.day,
                    "source_file": name,
                    "line_no": line_no,
                    "kept": c.key in kept_keys,
                    "broken": c.key in self._broken,
                    "raw_line": raw,
                }
            )
        return kept, refused, conflicts


class StagingWriter:
    """BatchWriter's place in a shard: batches buffered, appended to the staging tables every FLUSH_BATCHES; the
    latest ledger row of each file kept for the end."""

    def __init__(self, stage: Staging, shard_run: str, run: _ShardRun):
        self.stage, self.shard_run, self.run = stage, shard_run, run
        self.text_folder = run.text_folder
        self.pending: list[dict[str, pl.DataFrame]] = []
        self.ledger: dict[str, dict] = {}

    def submit(self, relations: dict[str, pl.DataFrame], ledger: list[dict], longest_line: int = 0) -> None:
        self.pending.append(relations)
        for row in ledger:
            earlier = self.ledger.pop(row["file_id"], None)
            replaces = sorted({*row["replaces"], *(earlier["replaces"] if earlier else ())})
            for old in replaces:
                self.ledger.pop(old, None)
            self.ledger[row["file_id"]] = {**row, "replaces": replaces}
        if len(self.pending) >= FLUSH_BATCHES:
            self.drain()

    def drain(self) -> None:
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        for rel in TABLES:
            frames = [p[rel] for p in pending if rel in p and p[rel].height]
            if frames:
                self.stage.append(rel, pl.concat(frames, how="diagonal_relaxed"), self.shard_run)
        claims, self.run.claims = self.run.claims, []
        if claims:
            self.stage.append(CLAIMS, pl.DataFrame(claims, schema=CLAIM_SCHEMA), self.shard_run)

    def close(self) -> None:
        self.drain()


def run_shard(task: ShardTask) -> IngestSummary:
    """Ingest one shard's files into the staging tables; the marker commit last."""
    stage = Staging(open_store(task.staging))
    mine = set(task.names)
    con = duckdb.connect()
    try:
        ensure_schema(con)
        text_folder = stage.text_folder(task.shard_run)
        run = _ShardRun(con, task, stage, text_folder)
        with ingest_settings(con, INGEST_MEMORY_LIMIT_BYTES):
            try:
                for entry in landing_entries(run.root):
                    if entry.name not in mine:
                        continue
                    run.summary.files_seen += 1
                    run.entry(entry)
                run.flush()
                run.writer.drain()
                run.summary.parse_workers = run.parser.workers if run.parser.spawned else 0
            finally:
                run.parser.close()
        writer: StagingWriter = run.writer  # type: ignore[assignment]
        stage.append(LEDGER, ledger_frame(list(writer.ledger.values())), task.shard_run)
        stage.publish_text(task.shard_run, text_folder)
        summary = run.summary
        commit_marker(stage, task, summary)
        return summary
    finally:
        con.close()


def commit_marker(stage: Staging, task: ShardTask, summary: IngestSummary) -> None:
    """The shard run's last commit: from here on the collect step reads its rows."""
    stage.append(
        MARKERS,
        pl.DataFrame(
            [
                {
                    SHARD_RUN: task.shard_run,
                    "shard": task.shard,
                    "shards": task.shards,
                    "files": summary.files_read,
                    "lines_read": summary.lines_read,
                    "bytes_read": summary.bytes_read,
                    "files_waiting": summary.files_waiting,
                    "bytes_held": summary.bytes_held,
                    "trace_files": summary.trace_files,
                    "calls_converted": summary.calls_converted,
                    "parse_workers": summary.parse_workers,
                }
            ],
            schema=MARKER_SCHEMA,
        ),
        None,
    )


def ingest_sharded(
    con: duckdb.DuckDBPyConnection,
    landing: str | Path,
    config: Config,
    *,
    shards: int,
    staging: str,
    now: datetime | None = None,
    final: bool = False,
    workers: int | None = None,
    batch_lines: int | None = None,
) -> IngestSummary:
    """Ingest the landing folder with `shards` shard processes, then collect their rows into the warehouse."""
    now = now or utc_now()
    root = landing_root(landing)
    stage = Staging(open_store(staging))
    stage.sweep()  # an earlier run's rows (a killed shard's, or a run killed before its collect) are never read
    sweep(con)
    ledger_rows = tuple(_ledger_rows(con))
    entries = list(landing_entries(root))
    plan = assign(root, entries, shards, final, config.ingest.settle_seconds)
    run_id = uuid.uuid4().hex
    tasks = [
        ShardTask(
            f"{run_id}-{i}",
            i,
            shards,
            str(root),
            tuple(names),
            staging,
            config,
            now,
            final,
            ledger_rows,
            workers,
            batch_lines,
        )
        for i, names in enumerate(plan)
    ]
    with spawned_pool(shards) as pool:
        # a shard is spawned inside submit: it imports this module, not the CLI, and parses with one polars thread
        with main_script_hidden(), parse_process_environment():
            futures = [pool.submit(run_shard, task) for task in tasks]
        try:
            summaries = [f.result() for f in futures]
        except BrokenProcessPool as exc:
            raise ShardFailed(
                f"an ingest shard process died ({exc}); nothing of this run was loaded into the warehouse, and its "
                "staged rows are swept by the next run, which reads the files again"
            ) from exc
    order = {entry.name: i for i, entry in enumerate(entries)}  # the one-worker ingest's file order
    summary = collect(
        con, stage, [t.shard_run for t in tasks], order, now, landing=root, max_line_bytes=config.ingest.max_line_bytes
    )
    for s in summaries:
        summary.files_seen += s.files_seen
        summary.files_read += s.files_read
        summary.lines_read += s.lines_read
        summary.bytes_read += s.bytes_read
        summary.files_waiting += s.files_waiting
        summary.bytes_held += s.bytes_held
        summary.trace_files += s.trace_files
        summary.calls_converted += s.calls_converted
        summary.parse_workers += s.parse_workers
    summary.shards = shards
    stage.sweep()
    return summary


def _ledger_rows(con: duckdb.DuckDBPyConnection) -> list[dict]:
    ledger = Ledger.load(con)
    return list(ledger.by_id.values())
