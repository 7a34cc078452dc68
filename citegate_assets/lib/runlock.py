"""One pipeline run per warehouse at a time: a second `citegate run` waits for the first or stops with
a message naming the holder. The lock is an advisory flock on <warehouse>.run.lock, released by the
kernel when the holder exits (even on kill -9), so a crash never leaves a stale lock."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path


class RunLockedError(RuntimeError):
    pass


def lock_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".run.lock")


@contextmanager
def run_lock(warehouse: Path, *, wait_s: float = 0.0, on_wait=None) -> Iterator[None]:
    path = lock_path(warehouse)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
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
                        f"{warehouse}: another citegate run is writing this warehouse ({holder}); "
                        f"try again when it ends, or pass --wait SECONDS"
                    ) from None
                if on_wait and not announced:
                    on_wait(holder)
                    announced = True
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} since {datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock
