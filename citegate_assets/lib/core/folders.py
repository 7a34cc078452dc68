"""Reading a folder that others fill (the landing, labels and reviews folders) and files the operator names.

Only a folder's top level is read. A symbolic link is followed only when its target is a regular file inside the
folder; a link out of it, a directory, a FIFO, a socket, a device or a dangling link is an entry to report, never
opened for reading. A file is opened with O_NOFOLLOW and O_NONBLOCK (a FIFO put in its place after the listing never
blocks), and what was opened is checked again: a regular file, inside the folder.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

SYMLINK_OUTSIDE_FOLDER = "symlink_outside_folder"
NOT_A_FILE = "not_a_file"
FILE_UNREADABLE = "file_unreadable"

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class OutsideFolder(Exception):
    pass


@dataclass(frozen=True)
class Entry:
    """One name in a folder: a file to read, or something to report (reason, detail)."""

    name: str
    path: Path
    reason: str | None = None
    detail: str | None = None

    @property
    def compressed(self) -> bool:
        return self.name.endswith(".gz")


@dataclass(frozen=True)
class Folder:
    """A folder read by these rules. root is resolved; `words` name it in details ("labels folder");
    `outside_reason` is the reason code of a link out of it."""

    root: Path
    words: str = "folder"
    outside_reason: str = SYMLINK_OUTSIDE_FOLDER

    @classmethod
    def at(cls, path: str | os.PathLike, words: str, outside_reason: str = SYMLINK_OUTSIDE_FOLDER) -> Folder:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"{path}: {words} not found")
        return cls(Path(os.path.realpath(path)), words, outside_reason)

    def entries(self) -> Iterator[Entry]:
        """Every visible top-level entry, by name; dot files (.DS_Store, editors' swap files) are skipped."""
        for name in sorted(os.listdir(self.root)):
            if name.startswith("."):
                continue
            path = self.root / name
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # removed while we looked
            if stat.S_ISLNK(st.st_mode):
                target = os.path.realpath(path)
                if not self.holds(target):
                    detail = (
                        f"{name}: a symbolic link out of the {self.words}; not followed, nothing of its target was read"
                    )
                    yield Entry(name, path, self.outside_reason, detail)
                    continue
                try:
                    st = os.stat(target)
                except OSError:
                    yield Entry(name, path, NOT_A_FILE, f"{name}: a symbolic link whose target does not exist")
                    continue
            if stat.S_ISREG(st.st_mode):
                yield Entry(name, path)
            else:
                yield Entry(name, path, NOT_A_FILE, f"{name}: not a regular file ({kind(st.st_mode)})")

    @contextmanager
    def open(self, entry: Entry) -> Iterator[tuple[BinaryIO, os.stat_result]]:
        """The entry's file, read-only, unbuffered; raises OutsideFolder, IsADirectoryError (not a regular file) or
        another OSError."""
        target = os.path.realpath(entry.path)
        if not self.holds(target):
            raise OutsideFolder(f"{entry.name}: resolves outside the {self.words}")
        fd = os.open(target, _READ_FLAGS | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            opened = _fd_path(fd)
            if not stat.S_ISREG(st.st_mode):
                raise IsADirectoryError(f"{entry.name}: not a regular file ({kind(st.st_mode)})")
            if opened is not None and not self.holds(opened):
                raise OutsideFolder(f"{entry.name}: resolves outside the {self.words}")
            fh = os.fdopen(fd, "rb", buffering=0)
        except BaseException:
            os.close(fd)
            raise
        with fh:
            yield fh, st

    def refused(self, entry: Entry, exc: OSError | OutsideFolder) -> tuple[str, str] | None:
        """(reason, detail) for an entry that could not be opened; None when it was removed since the listing."""
        if isinstance(exc, OutsideFolder):
            return self.outside_reason, f"{exc}; not followed, nothing of it was read"
        return unopened(entry.name, exc)

    def files(self, wanted: Callable[[str], bool]) -> Iterator[tuple[Entry, BinaryIO | None]]:
        """Each wanted name opened, in name order, each file once: under its own name when a link inside the folder
        names it too. An entry that cannot be read comes with its reason and no file. Other names are skipped."""
        listed = [entry for entry in self.entries() if wanted(entry.name)]
        names = _one_name_per_file([entry for entry in listed if entry.reason is None])
        seen: set[tuple[int, int]] = set()
        for entry in listed:
            if entry.reason:
                yield entry, None
                continue
            if entry.name not in names:
                continue
            with ExitStack() as stack:
                try:
                    fh, st = stack.enter_context(self.open(entry))
                except (OSError, OutsideFolder) as exc:
                    refused = self.refused(entry, exc)
                    if refused is not None:
                        yield replace(entry, reason=refused[0], detail=refused[1]), None
                    continue
                if (st.st_dev, st.st_ino) in seen:  # replaced since the listing by another name of a file read
                    continue
                seen.add((st.st_dev, st.st_ino))
                yield entry, fh

    def holds(self, target: str) -> bool:
        return target.startswith(str(self.root) + os.sep)


@contextmanager
def open_named_file(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A file the operator named (a config file, a labels file): links are followed, since the operator chose the
    path, but only a regular file is read, and opening never blocks; IsADirectoryError names what else it is."""
    fd = os.open(path, _READ_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{path}: not a regular file ({kind(st.st_mode)})")
        fh = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def unopened(name: str, exc: OSError) -> tuple[str, str] | None:
    """(reason, detail) for a file that could not be opened; None when it is gone."""
    if isinstance(exc, FileNotFoundError):
        return None
    if isinstance(exc, IsADirectoryError):
        return NOT_A_FILE, str(exc)
    return FILE_UNREADABLE, f"{name}: cannot be opened: {exc.strerror or exc}"


def read_named_file(path: str | os.PathLike) -> bytes:
    with open_named_file(path) as fh:
        return fh.read()


def _one_name_per_file(entries: list[Entry]) -> set[str]:
    """The name each file is read under: its own (not a link's) when it has one here, else the first link's."""
    changed: set[str] = set()
    by_file: dict[tuple[int, int], Entry] = {}
    for entry in entries:
        try:
            st = os.stat(entry.path)
        except OSError:
            changed.add(entry.name)  # gone or changed since the listing: opening it tells which
            continue
        kept = by_file.setdefault((st.st_dev, st.st_ino), entry)
        if kept.path.is_symlink() and not entry.path.is_symlink():
            by_file[(st.st_dev, st.st_ino)] = entry
    return changed | {entry.name for entry in by_file.values()}


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")  # what was really opened (Linux); guards a link swapped meanwhile
    except OSError:
        return None


def kind(mode: int) -> str:
    for test, word in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return word
    return "not a regular file"
