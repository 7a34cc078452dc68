"""Processes for the pure-Python work of a step (the offline judge, the numeric check): the code runs one
item at a time in the interpreter, so a step uses every core only when its items are split across processes.

Spawned, never forked (polars and DuckDB threads are running in the parent). One pool per worker count per
process, reused by every call of a step and closed at exit: starting processes costs about a second, so a
call with fewer than MIN_ITEMS items stays in this process.

Every pool citegate starts (this one, ingest's parse workers, the day runs' processes) is a `spawned_pool`: its
workers exit when the process that started them dies, however it dies (kill -9 included). Otherwise a worker
waits on its task queue forever, re-parented to init: it holds the queue's write end itself, so it never reads
EOF.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from multiprocessing.connection import wait
from typing import Any

import polars as pl

try:
    import fcntl
except ImportError:  # not a POSIX system
    fcntl = None  # type: ignore[assignment]

AUTO_MAX = 4  # `workers = 0` (auto): the cores, at most this many
MIN_ITEMS = 512  # below this a call is quicker in process than the pickling round trip
PIECE = 256  # items per task at most: small enough to keep every worker busy to the end, large enough to amortize
WATCH_S = 1.0  # how often a worker's watchdog checks that its parent is still there
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
RESULTS_PIPE_BYTES = 1 << 20  # the results pipe's size asked for (_widen_results_pipe)

_pools: dict[int, ProcessPoolExecutor] = {}


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for a stretch of pure-Python work that allocates many short-lived
    containers which die without cycles (an ingest batch's JSON objects and rows, a judge pass's word sets): its
    passes over them, and over a run's large heap, cost ~5-10 % and free nothing. Whatever cycle the work leaves is
    collected once the collector runs again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def worker_count(configured: int) -> int:
    """The processes a step may use: `configured` when positive, else the cores (at most AUTO_MAX)."""
    if configured > 0:
        return configured
    return max(1, min(os.cpu_count() or 1, AUTO_MAX))


def spawned_pool(workers: int, end_quickly: bool = False) -> ProcessPoolExecutor:
    """A pool of `workers` spawned processes that exit when this process dies (exit_with_parent). The kernel's
    parent-death signal is asked for only when the pool is made on the main thread: it fires when the thread
    that spawned a worker ends, and a pool's workers are spawned by the thread that submits to it.
    end_quickly: a worker that holds nothing to close (each task's output is whole when it returns) ends without the
    interpreter's finalization once the pool is shut down (end_now)."""
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(), threading.current_thread() is threading.main_thread(), end_quickly),
    )
    _widen_results_pipe(pool)
    return pool


def _widen_results_pipe(pool: ProcessPoolExecutor) -> None:
    """The pipe the workers' results come back through, at the largest size this kernel allows an unprivileged
    process (1 MiB by default, against 64 KiB): a parse batch's result is ~8 MB, and at 64 KiB a time the worker and
    the reader woke each other ~120 times a batch, each read a fresh bytes object grown into the reader's buffer.
    Best effort: elsewhere (not Linux, a pool without that pipe) results come as before."""
    reader = getattr(getattr(pool, "_result_queue", None), "_reader", None)
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if reader is None or set_size is None:
        return
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(int(f.read()), RESULTS_PIPE_BYTES)
        fcntl.fcntl(reader.fileno(), set_size, size)
    except (OSError, ValueError):
        pass


def _start_worker(parent_pid: int, death_signal: bool, end_quickly: bool) -> None:
    exit_with_parent(parent_pid, death_signal)
    if end_quickly:
        atexit.register(end_now)  # registered last, run first


def end_now() -> None:
    """The process ends here, its output flushed: the collection of every object and the teardown of every module
    cost a parse worker ~0.05 CPU-s for nothing it needs (2 workers after 4 batches: 0.18-0.24 CPU-s from the pool's
    shutdown to their end, 0.08-0.09 without; what is left is the kernel's unmapping)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(0)


def exit_with_parent(parent_pid: int, death_signal: bool) -> None:
    """A spawned worker's initializer: the worker ends as soon as `parent_pid` is no longer its parent.
    death_signal: the kernel kills it when its parent (the thread that spawned it) ends (Linux PR_SET_PDEATHSIG,
    SIGKILL: even while the worker is busy in C code). Always: a watchdog thread ends it when the parent's
    sentinel closes, or when os.getppid() changes (checked every WATCH_S)."""
    if death_signal and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watchdog alone
            pass
    if os.getppid() != parent_pid:  # the parent died before the signal was asked for
        os._exit(1)
    # its pool ends it with SIGTERM (a broken pool's shutdown): a process started with SIGINT ignored (a background
    # job) that ran Dagster in process has SIGTERM ignored too (Dagster maps SIGTERM to SIGINT's handler), and a
    # worker inheriting that could not be ended, so the shutdown waited for it forever
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = multiprocessing.parent_process()
    sentinel = parent.sentinel if parent is not None else None
    threading.Thread(target=_watch, args=(parent_pid, sentinel), name="citegate-worker-watch", daemon=True).start()


def _watch(parent_pid: int, sentinel: int | None) -> None:
    while True:
        if sentinel is None:
            time.sleep(WATCH_S)
        elif wait([sentinel], timeout=WATCH_S):
            os._exit(1)
        if os.getppid() != parent_pid:
            os._exit(1)


def _pool(workers: int) -> ProcessPoolExecutor:
    pool = _pools.get(workers)
    if pool is None:
        pool = spawned_pool(workers)
        _pools[workers] = pool
    return pool


@atexit.register
def _close_pools() -> None:
    for pool in _pools.values():
        pool.shutdown(wait=True, cancel_futures=True)
    _pools.clear()


def map_pieces(
    work: Callable[[Sequence[Any]], list[Any]],
    items: Sequence[Any],
    workers: int,
    on_piece: Callable[[int], None] | None = None,
) -> list[Any] | None:
    """work(piece) for consecutive pieces of items, split across `workers` spawned processes, concatenated in
    the items' order (work must pickle: a module-level function or a partial of one, and return one result
    per item). None when the call is too small to be worth it, or the pool broke (a worker was killed): the
    caller then does the work in process."""
    if workers <= 1 or len(items) < MIN_ITEMS:
        return None
    piece = max(1, min(PIECE, -(-len(items) // workers)))  # every worker gets a piece of a short call
    try:
        pool = _pool(workers)
        futures: list[Future] = [pool.submit(work, items[i : i + piece]) for i in range(0, len(items), piece)]
        out: list[Any] = []
        for future in futures:
            out.extend(future.result())
            if on_piece is not None:
                on_piece(len(out))
        return out
    except BrokenProcessPool:
        _pools.pop(workers, None)
        return None


ROWS_PER_CHUNK = 16_384  # rows made Python objects at a time: 40 MB of passages at 2.5 KB each


def map_rows(work: Callable[[Sequence[Any]], list[Any]], columns: Sequence[pl.Series], workers: int) -> list[Any]:
    """work over the rows of columns (Series of equal length) as tuples, in order: map_pieces a chunk of
    ROWS_PER_CHUNK rows at a time, in this process where map_pieces declines. Only one chunk's rows exist as Python
    objects at once (a day's passages as Python strings cost twice their text)."""
    total = len(columns[0]) if columns else 0
    out: list[Any] = []
    for offset in range(0, total, ROWS_PER_CHUNK):
        rows = list(zip(*(column.slice(offset, ROWS_PER_CHUNK).to_list() for column in columns)))
        done = map_pieces(work, rows, workers)
        out.extend(work(rows) if done is None else done)
    return out
