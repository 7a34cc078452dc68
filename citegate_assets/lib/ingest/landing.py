"""The landing folder: which entries are log files (citegate-log/1, or a trace format: docs/adapters.md),
opened without following anything out of the folder, and which UTC days its valid records hold (for `citegate run`
with no dates).

The folder is read by lib/core/folders.py's rules: only its top level; a symbolic link only when its target is a regular
file inside the folder (then the file is recognised by its content and read once); a link out of the folder is
`symlink_outside_landing`; a directory, a FIFO, a socket or a device is `not_a_file`, never opened for reading.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path
from typing import BinaryIO

from citegate_assets.lib.core.folders import Entry, Folder
from citegate_assets.lib.core.folders import OutsideFolder as OutsideLanding
from citegate_assets.lib.core.lines import (
    READ_ERRORS,
    DecompressedTooLarge,
    Line,
    ReadState,
    Stream,
    open_stream,
    read_lines,
)
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.ingest.adapters import (
    AdapterSettings,
    Call,
    TraceFileTooLarge,
    convert_lines,
    detect,
    detect_lines,
    record_line,
)
from citegate_assets.lib.ingest.records import Record, parse_raw_line

# app.jsonl, app.jsonl.gz, and the names rotation gives them: app.jsonl.1, app.jsonl.2.gz, app.jsonl-20261130(.gz);
# the same with .json, the name trace exports often have (Langfuse API pages, the OpenTelemetry collector's file
# exporter): a .json file must be of a trace format (one JSON value per line, or one JSON document)
LOG_NAME = re.compile(r".+\.(?P<ext>jsonl|json)(?:\.\d{1,6}|-\d{8,14})?(?:\.gz)?")
LOG_SUFFIXES = (".jsonl", ".jsonl.gz")  # the names citegate writes itself
_LOGGED_AT = re.compile(rb'"logged_at"\s*:\s*"([^"]{10,40})"')
SYMLINK_OUTSIDE_LANDING = "symlink_outside_landing"  # a documented reason code, older than the other folders' one


def is_log_name(name: str) -> bool:
    return LOG_NAME.fullmatch(name) is not None


def is_trace_name(name: str) -> bool:
    """A *.json name (or its rotated or gzipped form): a trace export, never read as citegate-log/1 lines."""
    m = LOG_NAME.fullmatch(name)
    return m is not None and m["ext"] == "json"


def landing_root(landing: str | os.PathLike) -> Path:
    return Folder.at(landing, "landing folder", SYMLINK_OUTSIDE_LANDING).root


def landing_folder(root: Path) -> Folder:
    """root: landing_root's answer (resolved)."""
    return Folder(root, "landing folder", SYMLINK_OUTSIDE_LANDING)


def landing_entries(root: Path) -> Iterator[Entry]:
    """Every visible top-level entry, by name (lib/core/folders.py's rules); a regular file without a log name is
    `not_a_log_file`."""
    for entry in landing_folder(root).entries():
        if entry.reason is None and not is_log_name(entry.name):
            yield replace(
                entry,
                reason="not_a_log_file",
                detail=f"{entry.name}: not *.jsonl, *.json or their .gz (nor a rotated *.jsonl.N, *.json.N)",
            )
        else:
            yield entry


def open_entry(root: Path, entry: Entry) -> AbstractContextManager[tuple[BinaryIO, os.stat_result]]:
    """The entry's file, opened read-only without following a link out of the folder and without blocking on a FIFO."""
    return landing_folder(root).open(entry)


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
