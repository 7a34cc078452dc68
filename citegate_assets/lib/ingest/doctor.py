"""`citegate doctor`: does each surface's template fit its prompts? Read-only, no warehouse.

The landing folder's valid records (read as `citegate run --final` reads them) go through the ingest's own
`build_frames`, in batches, with the config's templates; then, per (surface, template), each retrieved
chunk is counted once: found whole, cut (a prefix of it reached the prompt), in pieces, altered (its text
in the prompt differs from the retrieved text: escaped or rewritten), or missing. Missing chunks that all
come after every chunk found in their prompt (in retrieved order) are what a top-k assembly drops and do
not count against the template; other misfits do. A template that does not fit is compared with `auto`
and the other built-ins on the same records. Plain functions over the polars frames; no dagster here.

A file in a trace format (lib/adapters, docs/adapters.md) is detected and converted as ingest does it (by
its first line and head, or a *.json file as one document; read whole, up to [adapters].max_file_bytes, with the
[adapters] settings), and its calls' records are examined like any others; the report says which format each
file was read as. A *.json file of no trace format is not read (a note says so), as ingest rejects it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import BinaryIO

from citegate_assets.lib.core.lines import READ_ERRORS, DecompressedTooLarge, Line, ReadState, open_stream, read_lines
from citegate_assets.lib.core.terminal import ident, safe
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.ingest.adapters import (
    HEAD_BYTES,
    Call,
    Conversion,
    Partners,
    TraceFileTooLarge,
    convert_lines,
    detect,
    detect_lines,
    read_head,
    record_line,
)
from citegate_assets.lib.ingest.batch import frames_of_records, template_of
from citegate_assets.lib.ingest.chunk_fit import EXCERPT_CHARS, KIND_WORDS, KINDS, Fit, tally
from citegate_assets.lib.ingest.chunk_fit import chunk_fits as chunk_fits  # importers of the doctor keep working
from citegate_assets.lib.ingest.landing import (
    Entry,
    OutsideLanding,
    is_trace_name,
    landing_entries,
    landing_root,
    open_entry,
)
from citegate_assets.lib.ingest.profiles import BUILTIN_PROFILES
from citegate_assets.lib.ingest.records import Record, Reject, parse_raw_line
from citegate_assets.lib.ingest.rejects_view import doctor_rejects
from citegate_assets.lib.ingest.settings import IngestSettings as Config
from citegate_assets.lib.ingest.trace_partners import landing_partners, without

BATCH = 500
DEFAULT_LIMIT = 1000


@dataclass
class Reading:
    """The records to examine, by (surface, template), and what was not examined."""

    groups: dict[tuple[str, str], list[tuple[tuple[str, int], Record]]] = field(default_factory=dict)
    files: int = 0
    lines: int = 0
    rejected: Counter = field(default_factory=Counter)  # reason -> lines that are not records
    calls_rejected: Counter = field(default_factory=Counter)  # reason -> calls of trace files their adapter refused
    formats: dict[str, str] = field(default_factory=dict)  # file name -> the format it was read as, or not read (why)
    conversions: dict[str, str] = field(default_factory=dict)  # trace file name -> what its adapter made of it
    reject_rows: list[tuple[str, int, str, str]] = field(default_factory=list)  # (file, line, reason, detail)
    duplicates: int = 0
    over_limit: int = 0
    notes: list[str] = field(default_factory=list)  # entries not read, files not read to their end

    @property
    def records(self) -> int:
        return sum(len(v) for v in self.groups.values())


@dataclass
class Report:
    reading: Reading
    fits: list[Fit]
    rejected: Counter = field(default_factory=Counter)  # records build_frames refused (prompt_undecodable, ...)

    @property
    def ok(self) -> bool:
        """Something was examined and everything fits."""
        return bool(self.fits) and all(f.fits for f in self.fits)


# ---------------------------------------------------------------------------------------------------- reading


def read_landing(
    logs: str | Path, config: Config, *, limit: int | None = DEFAULT_LIMIT, now: datetime | None = None
) -> Reading:
    """Every valid record of the folder's log files (a last unterminated line counts, as with --final), at most
    `limit` per surface, the first of each request id only; nothing is written anywhere."""
    now = now or utc_now()
    root = landing_root(logs)
    out = Reading()
    seen: set[str] = set()
    per_surface: Counter = Counter()
    partners: dict[str, Partners] | None = None  # trace files that join across files, read once when needed

    def take(where: tuple[str, int], line: Line) -> None:
        rec, _ = parse_raw_line(line, now, config.ingest.max_line_bytes)
        if isinstance(rec, Reject):
            out.rejected[rec.reason] += 1
            out.reject_rows.append((where[0], where[1], rec.reason, rec.detail))
            return
        if rec.request_id in seen:
            out.duplicates += 1
            return
        if limit is not None and per_surface[rec.surface] >= limit:
            out.over_limit += 1
            return
        seen.add(rec.request_id)
        per_surface[rec.surface] += 1
        out.groups.setdefault((rec.surface, template_of(rec, config)), []).append((where, rec))

    for entry in landing_entries(root):
        if entry.reason:
            out.notes.append(f"{entry.detail} ({entry.reason})")
            continue
        try:
            with open_entry(root, entry) as (fh, _):
                out.files += 1
                if partners is None:
                    partners = landing_partners(root, config, final=True)
                conv = _trace_file(entry, fh, config, out, partners)
                if conv is not None:
                    for item in conv.items:
                        if isinstance(item, Call) and item.reason is None:
                            raw, problem = record_line(item)
                            if raw is None:
                                out.calls_rejected["adapter_error"] += 1
                                out.reject_rows.append((entry.name, item.line_no, "adapter_error", problem or ""))
                            else:
                                take((entry.name, item.line_no), Line(item.line_no, raw, 0, len(raw)))
                        elif isinstance(item, Call):
                            out.calls_rejected[item.reason] += 1
                            out.reject_rows.append((entry.name, item.line_no, item.reason or "", item.detail or ""))
                        else:
                            out.rejected[item.reason] += 1
                            out.reject_rows.append((entry.name, item.line_no, item.reason, item.detail))
                    continue
                if entry.name in out.formats:  # a trace file that could not be converted: its note says why
                    continue
                out.formats[entry.name] = "citegate-log/1"
                fh.seek(0)
                lines = read_lines(
                    open_stream(fh, entry.compressed),
                    ReadState(),
                    max_line_bytes=config.ingest.max_line_bytes,
                    max_inflated_bytes=config.ingest.max_decompressed_bytes if entry.compressed else None,
                    final=True,
                )
                for line in lines:
                    out.lines += 1
                    take((entry.name, line.no), line)
        except (OutsideLanding, DecompressedTooLarge, *READ_ERRORS) as exc:
            out.notes.append(f"{entry.name}: not read to its end: {exc}")
    return out


def _trace_file(
    entry: Entry, fh: BinaryIO, config: Config, out: Reading, partners: dict[str, Partners]
) -> Conversion | None:
    """The conversion of a trace-format file, as ingest makes it; None for a citegate-log/1 file, or for a trace
    file that cannot be converted (then `out` has a note saying why, and its format as `not read`)."""
    max_inflated = config.ingest.max_decompressed_bytes if entry.compressed else None
    first = next(
        read_lines(
            open_stream(fh, entry.compressed),
            ReadState(),
            max_line_bytes=config.ingest.max_line_bytes,
            max_inflated_bytes=max_inflated,
            final=True,
        ),
        None,
    )
    fh.seek(0)
    found = None
    if first is not None and not first.too_long:
        found = detect(first.raw, read_head(open_stream(fh, entry.compressed), HEAD_BYTES))
    if found is None and not is_trace_name(entry.name):
        return None  # citegate-log/1 lines
    fh.seek(0)
    lines: list[Line] = []
    total = 0
    try:
        for line in read_lines(
            open_stream(fh, entry.compressed),
            ReadState(),
            max_line_bytes=config.ingest.max_line_bytes,
            max_inflated_bytes=max_inflated,
            final=True,
        ):
            total += line.length
            if total > config.adapters.max_file_bytes:
                raise TraceFileTooLarge(
                    f"holds more than {config.adapters.max_file_bytes:,} bytes (the bound is [adapters].max_file_bytes)"
                )
            lines.append(line)
    except TraceFileTooLarge as exc:
        out.formats[entry.name] = "not read (trace_file_too_large)"
        out.notes.append(f"{entry.name}: a trace file is read whole, and it {exc}; not read (trace_file_too_large)")
        return None
    adapter, lines = detect_lines(lines)
    if adapter is None:
        out.formats[entry.name] = "not read (unknown_trace_format)"
        out.notes.append(
            f"{entry.name}: a *.json file must be of a trace format, and it is of none; not read (unknown_trace_format)"
        )
        return None
    joined = partners.get(adapter.name)
    conv = convert_lines(
        adapter, lines, config.adapters.settings(), without(joined, entry.name) if joined is not None else None
    )
    out.lines += conv.source_lines
    out.formats[entry.name] = adapter.name
    if conv.error is not None:
        out.formats[entry.name] = f"not read (adapter_failed: {adapter.name})"
        out.notes.append(f"{entry.name}: {conv.error}; not read (adapter_failed)")
        return None
    out.conversions[entry.name] = conv.describe().removeprefix(f"{adapter.name}: ")
    return conv


# ---------------------------------------------------------------------------------------------------- counting


def measure(
    records: list[tuple[tuple[str, int], Record]],
    config: Config,
    *,
    template: str | None = None,
    now: datetime | None = None,
    batch: int = BATCH,
) -> tuple[dict[tuple[str, str], Fit], Counter]:
    """Run the records through build_frames (as the ingest does, in batches), each with its own template or
    `template`; the counts per (surface, template), and the records build_frames refused, by reason."""
    now = now or utc_now()
    fits: dict[tuple[str, str], Fit] = {}
    refused: Counter = Counter()
    for lo in range(0, len(records), batch):
        part = records[lo : lo + batch]
        items = [
            (k, dataclasses.replace(rec, template=template) if template else rec) for k, (_, rec) in enumerate(part)
        ]
        origin = {k: where for k, (where, _) in enumerate(part)}
        frames, not_taken = frames_of_records(items, config, origin, now)
        refused.update(why.reason for _, _, why in not_taken)
        by_rid = {rec.request_id: origin[k] for k, rec in items}
        for key, f in tally(frames, by_rid).items():
            fits.setdefault(key, Fit(*key)).add(f)
    return fits, +refused


def diagnose(reading: Reading, config: Config, *, now: datetime | None = None, batch: int = BATCH) -> Report:
    """Each (surface, template) measured; one that does not fit is measured again under auto and every other
    built-in."""
    records = [item for group in reading.groups.values() for item in group]
    records.sort(key=lambda item: item[0])
    fits, refused = measure(records, config, now=now, batch=batch)
    for (surface, template), f in fits.items():
        if f.fits:
            continue
        mine = reading.groups[(surface, template)]
        for alt in BUILTIN_PROFILES:  # auto first
            if alt != template:
                alt_fits, _ = measure(mine, config, template=alt, now=now, batch=batch)
                f.alternatives[alt] = alt_fits.get((surface, alt), Fit(surface, alt))
    return Report(reading, [fits[k] for k in sorted(fits)], refused)


def doctor(
    logs: str | Path, config: Config, *, limit: int | None = DEFAULT_LIMIT, now: datetime | None = None
) -> Report:
    return diagnose(read_landing(logs, config, limit=limit, now=now), config, now=now)


# ---------------------------------------------------------------------------------------------------- text


COLUMNS = ("records", "chunks", "whole", "cut", "pieces", "missing", "at end", "altered", "no chunk", "no block")


def render(report: Report, logs: str | Path, config_name: str, limit: int | None) -> str:
    """The report for a terminal: every logged value escaped."""
    r = report.reading
    lines = [
        safe(
            f"citegate doctor: {r.records} records from {r.files} files in {logs} (config: {config_name}; "
            + (f"at most {limit} records per surface)" if limit else "every record)")
        )
    ]

    def counts(c: Counter) -> str:
        return ", ".join(f"{k} {v}" for k, v in c.most_common())

    # which format each file was read as: citegate-log/1 files on one line, each converted trace file on its own
    plain = [name for name, fmt in r.formats.items() if fmt == "citegate-log/1"]
    if plain and len(plain) < len(r.formats):
        lines.append(safe(f"  read as citegate-log/1: {', '.join(plain)}"))
    for name, fmt in r.formats.items():
        if name in r.conversions:
            lines.append(safe(f"  read as {fmt}: {name} ({r.conversions[name]})"))
        elif fmt != "citegate-log/1":
            lines.append(safe(f"  {fmt}: {name}"))
    skipped = [
        f"{sum(r.rejected.values())} lines that are not records ({counts(r.rejected)})" if r.rejected else "",
        f"{sum(r.calls_rejected.values())} trace calls not converted ({counts(r.calls_rejected)})"
        if r.calls_rejected
        else "",
        f"{r.duplicates} repeated request ids" if r.duplicates else "",
        f"{r.over_limit} records over the limit" if r.over_limit else "",
        f"{sum(report.rejected.values())} records refused ({counts(report.rejected)})" if report.rejected else "",
    ]
    if any(skipped):
        lines.append("  not examined: " + "; ".join(s for s in skipped if s))
    lines += doctor_rejects(r.reject_rows)  # escaped there
    lines += [f"  note: {safe(n)}" for n in r.notes]
    if not report.fits:
        lines.append("no records to examine")
        return "\n".join(lines)
    names = [(ident(f.surface), ident(f.template)) for f in report.fits]
    sw = max(len("surface"), *(len(s) for s, _ in names)) + 2
    tw = max(len("template"), *(len(t) for _, t in names)) + 2
    lines.append("")
    lines.append(f"{'surface':<{sw}}{'template':<{tw}}" + "".join(f"{c:>9}" for c in COLUMNS))
    for f, (s, t) in zip(report.fits, names):
        values = (
            f.records,
            f.chunks,
            f.whole,
            f.cut,
            f.pieces,
            f.missing,
            f.at_end,
            f.altered,
            f.unresolved,
            f.no_block + f.over_budget + f.unknown,
        )
        lines.append(f"{s:<{sw}}{t:<{tw}}" + "".join(f"{v:>9}" for v in values))
    lines.append("")
    for f, (s, t) in zip(report.fits, names):
        lines.append(f"{s} / {t}: {f.verdict()}")
        if f.fits:
            continue
        for kind in KINDS:
            ex = f.examples.get(kind)
            if ex is None or (kind == "missing" and not f.unexplained):
                continue
            detail = f", {ex.detail}" if ex.detail else ""
            lines.append(f"    e.g. {KIND_WORDS[kind]}: {ident(ex.request_id)} at {safe(ex.source)}:{ex.line}{detail}")
            lines.append(f"      {safe(ex.prompt)}{'…' if len(ex.prompt) >= EXCERPT_CHARS else ''}")
    lines.append("")
    bad = sum(not f.fits for f in report.fits)
    lines.append("every template fits" if not bad else f"{bad} of {len(report.fits)} (surface, template) do not fit")
    return "\n".join(lines)
