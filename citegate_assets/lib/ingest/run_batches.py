"""One ingest run's batches: the lines of the files read, committed in batches (across files), parsed (in this
process or a worker, lib/ingest/workers.py), their known request ids dropped in order, counted per file, and
handed to the writer (lib/ingest/writer.py) with each file's ledger row (lib/ingest/ledger.py)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import duckdb
import polars as pl

from citegate_assets.lib.core.lines import Line, PrefixChanged, ReadState
from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP
from citegate_assets.lib.ingest.adapters import Partners
from citegate_assets.lib.ingest.known_requests import KnownRequests
from citegate_assets.lib.ingest.landing import Entry
from citegate_assets.lib.ingest.ledger import FileTally, Ledger, ledger_row
from citegate_assets.lib.ingest.records import Reject
from citegate_assets.lib.ingest.retrievals import STORE_RETRIEVED_TEXT_ONCE
from citegate_assets.lib.ingest.settings import IngestSettings as Config
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
from citegate_assets.lib.ingest.writer import BatchWriter, out_of_memory
from citegate_assets.lib.storage.text_files import keep_only, remove_files

BATCH_LINES = 2000
# a batch's working set is ~20x its bytes (a parse worker peaks at ~0.7 GB, flat); 8 MB cost ~5 % more CPU
BATCH_BYTES = 32 * 1024 * 1024

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


class RunBatches:
    """The state of one ingest run: the folder, the ledger, the lines and ledger rows batched for the next
    commit, the request ids seen, and the counts; each committed batch parsed, counted and handed to the writer."""

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

    def _add(self, f: _File, line: Line | _Item, skip_lines: int = 0) -> None:
        if isinstance(line, Line) and line.no <= skip_lines:
            return
        self.lines.append((f, line))
        self.nbytes += line.length if isinstance(line, Line) else line.line.length
        self.files[id(f)] = f
        if len(self.lines) >= self.batch_lines or self.nbytes >= BATCH_BYTES:
            self.commit()

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

    def _known_of(self, request_ids: list[str]) -> list[tuple[str, str, str, bool]]:
        try:
            return self.known.lookup(request_ids)
        except duckdb.Error as exc:
            # the batch being written shares the memory_limit (a long line's copies pinned): ask again once it is in
            if not out_of_memory(exc):
                raise
            self.writer.drain()
            return self.known.lookup(request_ids)

    def _drop_known_requests(
        self, claims: list[Claim], origin: dict[int, tuple[str, int]]
    ) -> tuple[list[Claim], list[tuple[Claim, Reject, bool]], list[tuple]]:
        """The prompt log is immutable: a request id seen before is refused, and a different prompt under it is a
        conflict. Seen before = committed in the warehouse, or earlier in this run (possibly still being written)."""
        seen = self.run_seen
        # each id looked up in the run's dict (a set of every id the run had seen, built per batch, grew with the run)
        unknown = {claim.request_id for claim in claims if claim.request_id not in seen}
        for rid, sha, source, text_removed in self._known_of(list(unknown)):
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
