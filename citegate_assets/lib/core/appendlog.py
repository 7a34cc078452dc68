"""One line appended to an append-only JSONL log in a folder (the reviews log, the own labels), safely against other
writers and against a log replaced by something else.

The file is opened with ``O_APPEND`` and ``O_NOFOLLOW`` (a log replaced by a link, a FIFO or a directory is refused,
nothing written), an exclusive ``flock`` is held while the whole line is written with one ``os.write`` and
``fsync``ed, so two writers never interleave and a returned call means the line is on disk. A line cut short by a
writer killed mid-write (no trailing newline) is left as it is and the next line starts on a fresh line, so the
damage stays confined to that one line. The folder is created 0o700 and the file 0o600: logs hold user data.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path

from citegate_assets.lib.core.durable import fsync_dir
from citegate_assets.lib.core.folders import kind

FOLDER_MODE = 0o700
FILE_MODE = 0o600


class LogRefused(ValueError):
    """The log file is not a regular file (a link, a FIFO, a directory...): nothing was written."""


def append_line(folder: Path, name: str, line: bytes, what: str) -> Path:
    """Append `line` (one line, without its newline) to ``folder/name``; returns the file's path. `what` names the
    log in a refusal ("the reviews log")."""
    if b"\n" in line:
        raise ValueError(f"{what}: a line to append holds a newline; nothing was written")
    folder = Path(folder)
    ensure_folder(folder)
    path = folder / name
    fd, created = _open_log(path, what)
    try:
        if created:
            os.fchmod(fd, FILE_MODE)  # the umask may have taken more (or, with 0o600 asked, nothing) away
            fsync_dir(folder)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            data = line + b"\n"
            if not _ends_with_newline(fd):
                # a writer was killed mid-line: start on a fresh line so only the torn line is damaged
                data = b"\n" + data
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return path


def ensure_folder(folder: Path) -> None:
    if folder.is_dir():
        return
    if folder.parent != folder:
        folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(folder, FOLDER_MODE)
    except FileExistsError:
        if not folder.is_dir():
            raise
        return  # another writer created it at the same moment
    os.chmod(folder, FOLDER_MODE)  # in case the umask took owner bits away
    fsync_dir(folder.parent)


def _open_log(path: Path, what: str) -> tuple[int, bool]:
    """(fd, created): O_APPEND|O_CREAT|O_RDWR, never through a link and never on anything but a regular file (a FIFO
    does not block: O_NONBLOCK); telling whether this call created the file. LogRefused when the log is refused."""
    flags = os.O_APPEND | os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd, created = os.open(path, flags | os.O_EXCL, FILE_MODE), True
    except FileExistsError:
        try:
            fd, created = os.open(path, flags, FILE_MODE), False
        except OSError as exc:
            refused = {errno.ELOOP: "a symbolic link", errno.EISDIR: "a directory", errno.ENXIO: "a socket"}
            if exc.errno not in refused:
                raise
            raise LogRefused(f"{path}: {refused[exc.errno]}, not {what} file; nothing was written") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise LogRefused(f"{path}: {kind(st.st_mode)}, not {what} file; nothing was written")
    return fd, created


def _ends_with_newline(fd: int) -> bool:
    """Whether the log (held under our lock) is empty or ends with a newline."""
    size = os.fstat(fd).st_size
    return size == 0 or os.pread(fd, 1, size - 1) == b"\n"


def _write_all(fd: int, data: bytes) -> None:
    # One os.write is the whole line in practice; the loop only covers a short write (signal, quota), and
    # we still hold the lock, so the rest of the line follows directly.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "os.write wrote nothing")
        view = view[written:]
