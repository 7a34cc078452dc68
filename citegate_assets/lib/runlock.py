"""One pipeline run per warehouse at a time: a second writer (`citegate run`, `citegate calibrate`, a run
the schedule launched) waits for the first or stops with a message naming the holder. The lock is an
advisory flock on <warehouse>.run.lock, released by the kernel when the holder exits (even on kill -9),
so a crash never leaves a stale lock.

The lock is re-entrant per process: `citegate run` takes it before starting its in-process Dagster run,
and the run's warehouse resource takes it again (every run does, so runs the daemon launches hold it
too); the inner acquisition only counts, and the flock is released when the outermost one ends."""

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


# (st_dev, st_ino) of a lock file this process holds → [descriptor, depth]
_held: dict[tuple[int, int], list[int]] = {}
_held_guard = threading.Lock()


@contextmanager
def run_lock(
    warehouse: Path,
    *,
    wait_s: float = 0.0,
    on_wait: Callable[[str], None] | None = None,
    hint: str = "try again when it ends, or pass --wait SECONDS",
) -> Iterator[None]:
    path = lock_path(warehouse)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)  # the same file however the warehouse path was spelled
    with _held_guard:
        entry = _held.get(key)
        if entry is not None:
            entry[1] += 1
    if entry is not None:  # this process holds it already (e.g. `citegate run` around its own Dagster run)
        os.close(fd)
        try:
            yield
        finally:
            with _held_guard:
                entry[1] -= 1
        return
    try:
        deadline = time.monotonic() + wait_s
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                if time.monotonic() >= deadline:
                    raise RunLockedError(
                        f"{warehouse}: another citegate run is writing this warehouse ({holder}); {hint}"
                    ) from None
                if on_wait and not announced:
                    on_wait(holder)
                    announced = True
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC".encode(), 0)
        with _held_guard:
            _held[key] = [fd, 1]
        try:
            yield
        finally:
            with _held_guard:
                _held.pop(key, None)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
