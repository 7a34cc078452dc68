"""Ingest's parse stage, in the ingest process or in spawned worker processes (`[ingest] workers`).

A batch's lines are parsed, validated, decoded, normalized and built into the ingest tables' frames here; what
depends on the order of batches stays in the ingest process (lib/ingest/run_batches.py): dropping the request ids seen
before,
the per-file counts and ledger rows, the one DuckDB writer. So a worker builds the frames of each request id's first
decodable copy in its batch, and returns every decodable record's claim (request id, prompt hash, day) for the
ingest process to accept or refuse in order; the frames of the refused ones are filtered out there. The results are
the same rows whatever the number of workers.

Workers are spawned (never forked: polars and DuckDB hold threads), and only once a run has read more than
SPAWN_AFTER_BYTES or opens a file with more than that still to read, so small runs (and the tests) never pay their
start-up.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import polars as pl

from citegate_assets.lib.core.lines import Line
from citegate_assets.lib.core.processes import collector_paused, spawned_pool
from citegate_assets.lib.ingest.adapters import source_text
from citegate_assets.lib.ingest.batch import build_frames_isolating_failures, decode_prompts
from citegate_assets.lib.ingest.records import Record, Reject, read_raw_line, valid_line_text
from citegate_assets.lib.ingest.retrievals import STORE_RETRIEVED_TEXT_ONCE, retrievals_stored_once, stored_twice
from citegate_assets.lib.ingest.settings import IngestSettings as Config
from citegate_assets.lib.ingest.shared_lines import (
    Lease,
    RegionUnavailable,
    SharedLines,
    ShippedLines,
    read_shipped,
    stripped,
)
from citegate_assets.lib.storage.text_files import write_text_files

__all__ = [
    "PARSE_PROCESS_ENVIRONMENT",
    "BatchLine",
    "Claim",
    "ParsePool",
    "ParsedBatch",
    "parse_batch",
    "parse_process_environment",
    "resolve_workers",
    "valid_line_text",
]

MAX_AUTO_WORKERS = 4  # workers = 0 (auto): one per core, at most this many (the one DuckDB writer caps the gain)
# a run parses in-process until it has read this much: spawning workers costs ~1-2 s of imports each
SPAWN_AFTER_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class BatchLine:
    """One line of a batch as a worker takes it: its key in the batch, (file, line number), the line, and for an
    item of a converted trace file the reject its adapter gave (and the request id it names)."""

    key: int
    origin: tuple[str, int]
    line: Line
    reject: Reject | None = None
    request_id: str | None = None

    def with_raw(self, raw: bytes) -> BatchLine:
        """The same line with raw as its bytes (built directly: dataclasses.replace costs ~10x, per line)."""
        line = Line(self.line.no, raw, self.line.end, self.line.length, self.line.too_long)
        return BatchLine(self.key, self.origin, line, self.reject, self.request_id)


@dataclass(frozen=True)
class Claim:
    """A valid, decodable record as the ingest process orders it: the first copy of a request id wins."""

    key: int
    request_id: str
    prompt_sha256: str
    day: date


@dataclass
class ParsedBatch:
    rejects: list[dict]  # keyed reject rows: the lines' rejects in order, then the undecodable prompts
    claims: list[Claim]  # every valid decodable record, in batch order
    broken: list[dict]  # keyed reject rows of first copies the frames could not take (unprocessable_record)
    relations: dict[str, pl.DataFrame]  # batch_prompts … batch_answer_rejects, of each request id's first copy


def reject_row(key: int, reject: Reject, raw_text: str | None, rec: Record | Claim | None = None) -> dict:
    return {
        "key": key,
        "day": rec.day if rec else None,
        "request_id": rec.request_id if rec else reject.request_id,
        "reason": reject.reason,
        "detail": reject.detail,
        "raw_line": raw_text,
    }


def parse_batch(
    lines: list[BatchLine],
    config: Config,
    now: datetime,
    store_once: bool = STORE_RETRIEVED_TEXT_ONCE,
    text_folder: Path | None = None,
) -> ParsedBatch:
    """Parse, validate, decode and build the frames of one batch; nothing here depends on other batches.
    store_once: retrieved texts stored as schema 9 does (False: as schema 8, the tests' reference).
    text_folder: the prompt text is written there (lib/storage/text_files.py) and batch_prompts names its files, so the
    text does not travel back to the ingest process; None: it stays in the frame (an in-memory warehouse)."""
    with collector_paused():  # a batch's ~100k JSON objects and rows die without cycles
        parsed = _parse_batch(lines, config, now, store_once)
    if text_folder is not None:
        parsed.relations["batch_prompts"] = write_text_files(text_folder, parsed.relations["batch_prompts"])
    return parsed


def parse_batch_to_send(
    lines: list[BatchLine],
    config: Config,
    now: datetime,
    store_once: bool,
    text_folder: Path | None,
    shipped: ShippedLines | None = None,
) -> ParsedBatch:
    """parse_batch in a worker process: its frames compacted before they are pickled back (compacted). shipped: the
    lines' bytes are in the ingest process's shared region (lib/ingest/shared_lines.py), not in `lines`."""
    if shipped is not None:
        lines = read_shipped(shipped, lines)
    parsed = parse_batch(lines, config, now, store_once, text_folder)
    parsed.relations = {rel: compacted(frame) for rel, frame in parsed.relations.items()}
    return parsed


def compacted(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame with each text column holding only its own rows' bytes. A column filtered, joined or nulled out of
    a larger one shares that one's buffers, and pickling a frame writes the buffers whole: a batch's retrievals,
    with most texts nulled where the prompt holds them, pickled at ~10x their size, and the parse workers and the
    ingest process spent more CPU on sending the frames back than on most of the parsing."""
    texts = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    # concat_str builds each value anew (a null stays null)
    return frame.with_columns(pl.concat_str(pl.col(name), pl.lit("")).alias(name) for name in texts) if texts else frame


def _parse_batch(lines: list[BatchLine], config: Config, now: datetime, store_once: bool) -> ParsedBatch:
    rejects: list[dict] = []
    line_of: dict[int, Line] = {}  # a valid record's line: its text is decoded only for the reject rows that keep it
    items: list[tuple[int, Record]] = []
    origin: dict[int, tuple[str, int]] = {}
    for bl in lines:
        origin[bl.key] = bl.origin
        if bl.reject is not None:
            rejects.append({**reject_row(bl.key, bl.reject, source_text(bl.line.raw)), "request_id": bl.request_id})
            continue
        result, text = read_raw_line(bl.line, now, config.ingest.max_line_bytes)
        if isinstance(result, Reject):
            rejects.append(reject_row(bl.key, result, valid_line_text(bl.line) if text is None else text))
        else:
            line_of[bl.key] = bl.line
            items.append((bl.key, result))
    # decode first: a record whose prompt cannot be read must not claim its request id
    decoded, undecodable = decode_prompts(items)
    rejects.extend(reject_row(key, why, valid_line_text(line_of[key]), rec) for key, rec, why in undecodable)
    decodable = [(key, rec) for key, rec in items if key in decoded]
    firsts: list[tuple[int, Record]] = []
    seen: set[str] = set()
    for key, rec in decodable:
        if rec.request_id not in seen:  # a later copy in the batch is refused whatever the ledger says
            seen.add(rec.request_id)
            firsts.append((key, rec))
    frames, broken = build_frames_isolating_failures(firsts, config, origin, now, decoded)
    return ParsedBatch(
        rejects=rejects,
        # after the frames: the prompts' hashes then encode what their column kept (Record.prompt_sha256)
        claims=[Claim(key, rec.request_id, rec.prompt_sha256, rec.day) for key, rec in decodable],
        broken=[reject_row(key, why, valid_line_text(line_of[key]), rec) for key, rec, why in broken],
        relations={
            "batch_prompts": frames.prompts,
            "batch_sections": frames.sections,
            "batch_retrievals": retrievals_stored_once(frames) if store_once else stored_twice(frames),
            "batch_citations": frames.citations,
            "batch_answer_rejects": frames.answer_rejects,
        },
    )


def resolve_workers(configured: int) -> int:
    """[ingest] workers: 0 = one per core, at most MAX_AUTO_WORKERS; 1 = parse in the ingest process."""
    if configured > 0:
        return configured
    # the cores this process may run on (a container's CPU set), not the machine's
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cores, MAX_AUTO_WORKERS))


class Parsed:
    """A batch being parsed: in a worker (a future), or already parsed in the ingest process."""

    def __init__(
        self,
        lines: list[BatchLine],
        config: Config,
        now: datetime,
        store_once: bool,
        future: Future | None,
        text_folder: Path | None = None,
        lease: Lease | None = None,
    ):
        self._lines, self._config, self._now, self._store_once, self._future = lines, config, now, store_once, future
        self._text_folder = text_folder
        self._lease = lease  # the shared region holding the lines' bytes, until the batch is parsed
        self._result: ParsedBatch | None = (
            None if future is not None else parse_batch(lines, config, now, store_once, text_folder)
        )
        self.in_worker = future is not None

    def done(self) -> bool:
        return self._future is None or self._future.done()

    def result(self) -> ParsedBatch:
        if self._result is None:
            assert self._future is not None
            try:
                self._result = self._future.result()
            except (BrokenProcessPool, RegionUnavailable) as exc:
                # a worker died (killed, out of memory), or could not map the shared region: parse the batch here
                # rather than lose it
                if isinstance(exc, RegionUnavailable) and self._lease is not None:
                    self._lease.refused()
                    self._lease = None
                self._result = parse_batch(self._lines, self._config, self._now, self._store_once, self._text_folder)
            self._future = None
            if self._lease is not None:
                self._lease.release()
                self._lease = None
        return self._result


class ParsePool:
    """Batches parsed in `workers` spawned processes once the run has read SPAWN_AFTER_BYTES or expects a file
    that large (expect); in-process before that, with workers = 1, or after the pool broke."""

    def __init__(self, config: Config, workers: int, text_folder: Path | None = None):
        self.config = config
        self.workers = workers
        self.text_folder = text_folder  # where each batch's prompt text is written (None: kept in the frames)
        self._bytes = 0
        self._pool: ProcessPoolExecutor | None = None
        self._regions = SharedLines()
        self._broken = False
        self.spawned = False  # did this run start worker processes

    @property
    def depth(self) -> int:
        """How many batches may be in flight before the ingest process waits for the oldest."""
        return self.workers if self._pool is not None else 0

    def expect(self, nbytes: int) -> None:
        """A file with nbytes still to read is about to be batched: more than SPAWN_AFTER_BYTES starts the workers
        now, so they import while its first batches are read rather than after a serial first stretch."""
        if nbytes > SPAWN_AFTER_BYTES:
            self._start()

    def _start(self) -> None:
        if self._pool is None and not self._broken and self.workers > 1:
            # its workers exit with this process, however it dies; and with the pool, without Python's finalization
            self._pool = spawned_pool(self.workers, end_quickly=True)
            self.spawned = True

    def submit(self, lines: list[BatchLine], now: datetime, nbytes: int, store_once: bool) -> Parsed:
        self._bytes += nbytes
        if self._bytes > SPAWN_AFTER_BYTES:
            self._start()
        if self._pool is not None:
            lease = self._regions.lend([bl.line.raw for bl in lines])
            try:
                with main_script_hidden(), parse_process_environment():  # a worker is spawned, if at all, inside submit
                    # the lines' bytes travel through a shared region when there is one, the rest is pickled
                    future = self._pool.submit(
                        parse_batch_to_send,
                        lines if lease is None else stripped(lines),
                        self.config,
                        now,
                        store_once,
                        self.text_folder,
                        None if lease is None else lease.shipped,
                    )
                return Parsed(lines, self.config, now, store_once, future, self.text_folder, lease)
            except BrokenProcessPool:
                if lease is not None:
                    lease.release()
                self._broken = True
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        return Parsed(lines, self.config, now, store_once, None, self.text_folder)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._regions.close()


# What a spawned parse process's environment (a parse worker's, an ingest shard's) holds unless the ingest process's
# already sets it:
PARSE_PROCESS_ENVIRONMENT = {
    # the workers are the parallelism: each worker's own polars pool on the same cores cost CPU (~5 %) for no speed
    "POLARS_MAX_THREADS": "1",
    # a batch's working set (~20x its bytes) is freed and taken again batch after batch: glibc malloc and polars'
    # jemalloc keep those pages rather than hand them back and fault them in anew (~0.6M page faults, ~1 CPU-s a
    # 660 MB day). A worker ends with its run, so what it keeps is its peak, not a growing heap.
    "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
    "_RJEM_MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1",
}


# what `import polars` writes into _RJEM_MALLOC_CONF when nothing else was asked (polars/__init__.py): a worker
# inherits it, so it counts as unset here, or the workers would run on polars' decay times rather than ours
POLARS_OWN_JEMALLOC_CONF = "dirty_decay_ms:500,muzzy_decay_ms:1000"


def _unset(name: str) -> bool:
    value = os.environ.get(name)
    return value is None or (name == "_RJEM_MALLOC_CONF" and value == POLARS_OWN_JEMALLOC_CONF)


@contextmanager
def parse_process_environment() -> Iterator[None]:
    """PARSE_PROCESS_ENVIRONMENT for a process spawned in the block (a spawned process takes the environment as it is
    when it starts), but for what the user set; the ingest process's own is as it was afterwards."""
    before = {name: os.environ.get(name) for name in PARSE_PROCESS_ENVIRONMENT if _unset(name)}
    for name in before:
        os.environ[name] = PARSE_PROCESS_ENVIRONMENT[name]
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextmanager
def main_script_hidden() -> Iterator[None]:
    """A spawned process runs the parent's __main__ script again (as __mp_main__) before its task: a script without
    an `if __name__ == "__main__"` guard would ingest again in every worker, and a CLI's imports (Dagster) cost
    seconds. The workers need only this module, so they are spawned while __main__ is a bare module."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main
