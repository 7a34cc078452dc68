"""Who may write a warehouse, and when. Two advisory flocks beside the warehouse, both released by the kernel
when the holder exits (even on kill -9), so a crash never leaves a stale lock:

- <warehouse>.run.lock, held by a run from its start to its end. A run over whole nights (ingest, the gates,
  the metrics, the publish; `citegate calibrate`, `citegate forget`) holds it exclusively: a second one waits
  for it or stops with a message naming the holder. A day run (only daily assets: what `citegate run
  --workers N` and a UI backfill launch) holds it shared, so several days run at once; a whole run waits for
  the day runs to end (up to DAY_RUNS_WAIT_S), and a day run waits for a whole run as a whole run does.
- <warehouse>.open.lock, held exclusively while a process has the DuckDB file open. DuckDB admits one process
  per file, and every step opens it only to read its inputs and to write its outputs, so day runs take turns
  at the file while their pure-Python work (parsing, the judge) runs side by side. Waiting for it is not an
  error: a holder keeps it for one read or one transaction (ingest: for its whole append).

Both are re-entrant per process: `citegate run` takes the run lock before starting its in-process Dagster
run, and the run's warehouse resource takes it again; the inner acquisition only counts, and the flock is
released when the outermost one ends."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path


class RunLockedError(RuntimeError):
    pass


def lock_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".run.lock")


def open_lock_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".open.lock")


# how long a whole run waits for day runs to let the run lock go (they end on their own; a whole run that holds it
# is waited for only as long as the caller says, by default not at all)
DAY_RUNS_WAIT_S = 6 * 3600.0
# (st_dev, st_ino) of a lock file this process holds → [descriptor, depth, exclusive]
_held: dict[tuple[int, int], list] = {}
_held_guard = threading.Lock()
# per lock file, one thread of this process at a time takes the flock it does not hold yet (the others then
# find it held)
_taking: dict[tuple[int, int], threading.Lock] = {}


@contextmanager
def _flock(
    path: Path,
    *,
    exclusive: bool,
    wait_s: float | None,
    on_wait: Callable[[str], None] | None,
    refuse: Callable[[str], Exception],
    wait_note_s: float = 0.0,
) -> Iterator[None]:
    """Hold the flock on path (wait_s None: wait as long as it takes). Re-entrant per process."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)  # the same file however the warehouse path was spelled
    with _held_guard:
        taking = _taking.setdefault(key, threading.Lock())
    with taking:
        with _held_guard:
            entry = _held.get(key)
            if entry is not None:
                if exclusive and not entry[2]:
                    os.close(fd)
                    raise RuntimeError(f"{path}: held shared by this process, asked for exclusively")
                entry[1] += 1
        if entry is None:
            try:
                _acquire(fd, exclusive, wait_s, on_wait, refuse, wait_note_s)
            except BaseException:
                os.close(fd)
                raise
            # who holds it, for a waiter's message (among day runs, the latest to start)
            who = "pid" if exclusive else "day run pid"
            stamp = f"{who} {os.getpid()} since {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"
            os.ftruncate(fd, 0)
            os.pwrite(fd, stamp.encode(), 0)
            with _held_guard:
                _held[key] = entry = [fd, 1, exclusive]
        else:
            os.close(fd)  # this process holds it already
    try:
        yield
    finally:
        with _held_guard:
            entry[1] -= 1
            last = entry[1] == 0
            if last:
                _held.pop(key, None)
        if last:
            os.close(entry[0])  # closing the descriptor releases the flock


def _acquire(
    fd: int,
    exclusive: bool,
    wait_s: float | None,
    on_wait: Callable[[str], None] | None,
    refuse: Callable[[str], Exception],
    wait_note_s: float,
) -> None:
    start = time.monotonic()
    announced = False
    behind_day_runs = 0.0  # seconds spent waiting while only day runs held it
    while True:
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            waited = time.monotonic() - start - behind_day_runs
            if exclusive and _only_shared_holders(fd) and behind_day_runs < DAY_RUNS_WAIT_S:
                # day runs end on their own (a backfill's, `--workers N`'s): a whole run waits for them
                if on_wait and not announced:
                    on_wait(holder)
                    announced = True
                time.sleep(0.2)
                behind_day_runs += 0.2
                continue
            if wait_s is not None and waited >= wait_s:
                raise refuse(holder) from None
            if on_wait and not announced and waited >= wait_note_s:
                on_wait(holder)
                announced = True
            time.sleep(0.05 if wait_s is None else 0.2)


def _only_shared_holders(fd: int) -> bool:
    """Whether the lock's holders are all shared ones (day runs): a shared hold is granted only then."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return True


@contextmanager
def run_lock(
    warehouse: Path,
    *,
    wait_s: float = 0.0,
    on_wait: Callable[[str], None] | None = None,
    hint: str = "try again when it ends, or pass --wait SECONDS",
    shared: bool = False,
) -> Iterator[None]:
    """The run lock: exclusive for a whole run, shared for a day run (several at once, no whole run meanwhile)."""

    def refuse(holder: str) -> Exception:
        return RunLockedError(f"{warehouse}: another citegate run is writing this warehouse ({holder}); {hint}")

    with _flock(lock_path(warehouse), exclusive=not shared, wait_s=wait_s, on_wait=on_wait, refuse=refuse):
        yield


@contextmanager
def open_lock(warehouse: Path, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Held while this process has the warehouse file open; another process's turn is waited for."""

    def never(holder: str) -> Exception:  # wait_s None: not reached
        return RuntimeError(holder)

    with _flock(
        open_lock_path(warehouse), exclusive=True, wait_s=None, on_wait=on_wait, refuse=never, wait_note_s=10.0
    ):
        yield
