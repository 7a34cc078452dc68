"""The landing folder: which entries are log files (citegate-log/1, or a trace format: README "Trace formats"),
opened without following anything out of the folder, and which UTC days its valid records hold (for `citegate run`
with no dates).

Only the folder's top level is read. A symbolic link is read only when its target is a regular file
inside the landing folder (then the file is recognised by its content and read once); a link out of
the folder, a directory, a FIFO, a socket or a device is an entry to report, never opened for reading.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import BinaryIO

from .adapters import AdapterSettings, Call, TraceFileTooLarge, convert_lines, detect, detect_lines, record_line
from .lines import READ_ERRORS, DecompressedTooLarge, Line, ReadState, Stream, open_stream, read_lines
from .records import Record, parse_raw_line
from .timestamps import utc_now

# app.jsonl, app.jsonl.gz, and the names rotation gives them: app.jsonl.1, app.jsonl.2.gz, app.jsonl-20261130(.gz);
# the same with .json, the name trace exports often have (Langfuse API pages, the OpenTelemetry collector's file
# exporter): a .json file must be of a trace format (one JSON value per line, or one JSON document)
LOG_NAME = re.compile(r".+\.(?P<ext>jsonl|json)(?:\.\d{1,6}|-\d{8,14})?(?:\.gz)?")
LOG_SUFFIXES = (".jsonl", ".jsonl.gz")  # the names citegate writes itself
_LOGGED_AT = re.compile(rb'"logged_at"\s*:\s*"([^"]{10,40})"')


class OutsideLanding(Exception):
    pass


@dataclass(frozen=True)
class Entry:
    """One name in the landing folder: a log file to read, or something to report (reason, detail)."""

    name: str
    path: Path
    reason: str | None = None
    detail: str | None = None

    @property
    def compressed(self) -> bool:
        return self.name.endswith(".gz")


def is_log_name(name: str) -> bool:
    return LOG_NAME.fullmatch(name) is not None


def is_trace_name(name: str) -> bool:
    """A *.json name (or its rotated or gzipped form): a trace export, never read as citegate-log/1 lines."""
    m = LOG_NAME.fullmatch(name)
    return m is not None and m["ext"] == "json"


def landing_root(landing: str | os.PathLike) -> Path:
    root = Path(landing)
    if not root.is_dir():
        raise FileNotFoundError(f"{landing}: landing folder not found")
    return Path(os.path.realpath(root))


def landing_entries(root: Path) -> Iterator[Entry]:
    """Every visible top-level entry, by name; dot files (.DS_Store, editors' swap files) are not logs."""
    for name in sorted(os.listdir(root)):
        if name.startswith("."):
            continue
        path = root / name
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue  # removed while we looked
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(path)
            if not _inside(root, target):
                yield Entry(
                    name,
                    path,
                    "symlink_outside_landing",
                    f"{name}: a symbolic link out of the landing folder; not followed, nothing of its target was read",
                )
                continue
            try:
                st = os.stat(target)
            except OSError:
                yield Entry(name, path, "not_a_file", f"{name}: a symbolic link whose target does not exist")
                continue
        if not stat.S_ISREG(st.st_mode):
            yield Entry(name, path, "not_a_file", f"{name}: not a regular file ({_kind(st.st_mode)})")
        elif not is_log_name(name):
            yield Entry(
                name,
                path,
                "not_a_log_file",
                f"{name}: not *.jsonl, *.json or their .gz (nor a rotated *.jsonl.N, *.json.N)",
            )
        else:
            yield Entry(name, path)


@contextmanager
def open_entry(root: Path, entry: Entry) -> Iterator[tuple[BinaryIO, os.stat_result]]:
    """The entry's file, opened read-only without following a link out of the folder and without blocking on a FIFO."""
    target = os.path.realpath(entry.path)
    if not _inside(root, target):
        raise OutsideLanding(f"{entry.name}: resolves outside the landing folder")
    fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        opened = _fd_path(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IsADirectoryError(f"{entry.name}: not a regular file ({_kind(st.st_mode)})")
        if opened is not None and not _inside(root, opened):
            raise OutsideLanding(f"{entry.name}: resolves outside the landing folder")
        fh = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh, st


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")  # what was really opened (Linux); guards a link swapped meanwhile
    except OSError:
        return None


def _inside(root: Path, target: str) -> bool:
    return target.startswith(str(root) + os.sep)


def _kind(mode: int) -> str:
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


def days_in_landing(
    landing: str | os.PathLike,
    known: dict[str, tuple[int, int, set[date]]] | None = None,
    *,
    now: datetime | None = None,
    max_line_bytes: int = 32 * 1024 * 1024,
    max_inflated_bytes: int = 4 * 1024 * 1024 * 1024,
    adapter_settings: AdapterSettings | None = None,
    max_trace_bytes: int = 64 * 1024 * 1024,
) -> set[date]:
    """UTC dates of logged_at over the valid records of every log file.

    `known` maps a file name to (size, mtime_ns, days) of a file read to its end before: unchanged, its
    days are taken from there. Elsewhere a day counts once one valid record holds it (a rejected line,
    however dated, never widens a run): only the first lines of each new day are parsed in full. A trace-format
    file is converted whole (as ingest does) and its calls' valid records give its days.
    """
    now = now or utc_now()
    known = known or {}
    root = landing_root(landing)
    days: set[date] = set()
    for entry in landing_entries(root):
        if entry.reason:
            continue
        try:
            with open_entry(root, entry) as (fh, st):
                seen = known.get(entry.name)
                if seen and seen[0] == st.st_size and seen[1] == st.st_mtime_ns:
                    days |= seen[2]
                    continue
                bound = max_inflated_bytes if entry.compressed else None
                trace = _trace_lines(open_stream(fh, entry.compressed), max_line_bytes, bound, max_trace_bytes, entry)
                if trace is not None:
                    days |= _trace_days(trace, adapter_settings or AdapterSettings(), now, max_line_bytes)
                    continue
                fh.seek(0)
                days |= _valid_days(open_stream(fh, entry.compressed), now, max_line_bytes, bound, days)
        except (OutsideLanding, *READ_ERRORS, DecompressedTooLarge, TraceFileTooLarge):
            continue  # such a file gets its reject row at ingest
    return days


def _trace_lines(
    stream: Stream, max_line_bytes: int, bound: int | None, max_trace_bytes: int, entry: Entry
) -> list[Line] | None:
    """The whole file when it may be of a trace format (its first line says so, or it is named *.json): ingest's
    rule; None for a citegate-log/1 file, read line by line as before."""
    lines = read_lines(stream, ReadState(), max_line_bytes=max_line_bytes, max_inflated_bytes=bound, final=True)
    first = next(lines, None)
    if first is None or (first.too_long or detect(first.raw) is None) and not is_trace_name(entry.name):
        return None
    out, total = [first], first.length
    for line in lines:
        total += line.length
        if total > max_trace_bytes:
            raise TraceFileTooLarge(f"{entry.name}: over {max_trace_bytes:,} bytes")
        out.append(line)
    return out


def _trace_days(lines: list[Line], settings: AdapterSettings, now: datetime, max_line_bytes: int) -> set[date]:
    adapter, lines = detect_lines(lines)
    if adapter is None:
        return set()
    found: set[date] = set()
    for item in convert_lines(adapter, lines, settings).items:
        if isinstance(item, Call) and item.reason is None:
            raw, _ = record_line(item)
            if raw is None:
                continue
            rec, _ = parse_raw_line(Line(item.line_no, raw, 0, len(raw)), now, max_line_bytes)
            if isinstance(rec, Record):
                found.add(rec.day)
    return found


def _valid_days(
    stream: Stream, now: datetime, max_line_bytes: int, bound: int | None, confirmed: set[date]
) -> set[date]:
    found: set[date] = set()
    try:
        for line in read_lines(
            stream, ReadState(), max_line_bytes=max_line_bytes, max_inflated_bytes=bound, final=True
        ):
            if line.too_long:
                continue
            m = _LOGGED_AT.search(line.raw)
            if m is None:
                continue
            day = _utc_day(m.group(1))
            if day is None or day in found or day in confirmed:
                continue
            rec, _ = parse_raw_line(line, now, max_line_bytes)  # the ingest's own rule: only what it keeps counts
            if isinstance(rec, Record):
                found.add(rec.day)
    except (*READ_ERRORS, DecompressedTooLarge):
        pass
    return found


def _utc_day(value: bytes) -> date | None:
    try:
        ts = datetime.fromisoformat(value.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        return None
    return ts.astimezone(timezone.utc).date() if ts.tzinfo is not None else None
