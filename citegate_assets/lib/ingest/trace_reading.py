"""An ingest run's trace-format files (lib/ingest/adapters, docs/trace-formats.md): a file is detected by its first
line and converted as a whole once it has settled: each call becomes one line-equivalent (its citegate-log/1
record) fed through the same record path, with the source line that holds the call; a call the adapter could not
convert, and a bad source line, become reject rows. Its ledger row counts items (calls and line rejects) where a
log file's counts lines, so `lines_read = records_ingested + records_rejected` holds for both; a file that grows is
converted again and the items it gave before are skipped, by count (adapters give items in source-line order)."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import BinaryIO

from citegate_assets.lib.core.lines import (
    READ_ERRORS,
    DecompressedTooLarge,
    Line,
    PrefixChanged,
    ReadState,
    open_stream,
    prefix_matches,
    read_lines,
)
from citegate_assets.lib.ingest.adapters import (
    ADAPTER_ERROR,
    HEAD_BYTES,
    Adapter,
    Call,
    LineReject,
    Partners,
    TraceFileTooLarge,
    convert_lines,
    detect,
    is_json_value,
    read_head,
    record_line,
    registry,
    whole_document,
)
from citegate_assets.lib.ingest.landing import Entry
from citegate_assets.lib.ingest.ledger import distinct_id, ledger_row, path_id, trace_id
from citegate_assets.lib.ingest.records import Reject
from citegate_assets.lib.ingest.run_batches import RunBatches, _Item
from citegate_assets.lib.ingest.trace_partners import landing_partners, without


class TraceReading(RunBatches):
    """An ingest run's reading of trace-format files (lib/ingest/adapters): each converted as a whole once it has
    settled, its items batched like lines."""

    def _detect(self, entry: Entry, fh: BinaryIO) -> Adapter | None:
        """The trace format of the file's first line, or None (a citegate-log/1 file, or no format known)."""
        fh.seek(0)
        try:
            first = next(
                read_lines(
                    open_stream(fh, entry.compressed),
                    ReadState(),
                    max_line_bytes=self.limits.max_line_bytes,
                    max_inflated_bytes=self.limits.max_decompressed_bytes if entry.compressed else None,
                    final=True,
                ),
                None,
            )
        except (*READ_ERRORS, DecompressedTooLarge):
            return None  # the reader that follows reports it
        if first is None or first.too_long:
            return None
        fh.seek(0)
        try:
            head = read_head(open_stream(fh, entry.compressed), HEAD_BYTES)
        except READ_ERRORS:
            return None
        return detect(first.raw, head)

    def read_trace(
        self,
        entry: Entry,
        fh: BinaryIO,
        st: os.stat_result,
        fingerprint: str,
        adapter: Adapter | None,
        settled: bool,
        retire: list[str],
    ) -> None:
        """Convert a trace file as a whole once it has settled (pairing needs every span of a trace); the items
        it gave on an earlier run are skipped. adapter None: a *.json file whose first line is of no format (it may
        still be one JSON document over several lines)."""
        name = entry.name
        here = self.ledger.at(self.landing, name)
        known = here if here is not None and here["file_id"].startswith("trace:") else None
        if not settled:
            detail = (
                f"{name}: a trace file, converted as a whole once it has not changed for [ingest].settle_seconds "
                "(or `citegate run --final`)"
            )
            self._hold(entry, st, retire, known, detail)
            return
        state = ReadState()
        try:
            lines = self._read_whole(entry, fh, state)
        except TraceFileTooLarge as exc:
            self._trace_failed(entry, st, retire, known, "trace_file_too_large", f"{name}: {exc}; nothing of it read")
            return
        except DecompressedTooLarge as exc:
            detail = f"{name}: {exc} (the bound is [ingest].max_decompressed_bytes); nothing of it read"
            self._trace_failed(entry, st, retire, known, "decompressed_too_large", detail)
            return
        except READ_ERRORS as exc:
            detail = f"{name}: unreadable: {exc}; a trace file is converted whole, so nothing of it was read"
            self._trace_failed(entry, st, retire, known, "file_unreadable", detail)
            return
        document = len(lines) > 1 and not is_json_value(lines[0].raw)  # one JSON document over several lines
        if adapter is None:
            doc = whole_document(lines)  # one JSON document (e.g. a pretty-printed API page): one line
            adapter = detect(doc.raw, doc.raw[:HEAD_BYTES]) if doc is not None else None
            if doc is None or adapter is None:
                detail = (
                    f"{name}: a *.json file must be of a trace format, and it is of none "
                    f"({', '.join(registry())}; citegate-log/1 files are named *.jsonl)"
                )
                self._trace_failed(entry, st, retire, known, "unknown_trace_format", detail)
                return
            lines, document = [doc], True
        row: dict | None
        if not document:
            fid = trace_id(adapter.name, fingerprint)
            row = self.ledger.by_id.get(fid)
            if row is not None and not self._prefix_matches(entry, fh, row):
                if (row["landing"], row["file_name"]) == (self.landing, name):
                    self._changed(entry, st, row, PrefixChanged("its first bytes differ from those converted before"))
                    return
                # the same first line as a file converted elsewhere, different bytes after it: a file of its own
                fid = trace_id(adapter.name, distinct_id(fingerprint, self.landing, name))
                row = self.ledger.by_id.get(fid)
                if row is not None and not self._prefix_matches(entry, fh, row):
                    self._changed(entry, st, row, PrefixChanged("its first bytes differ from those converted before"))
                    return
        else:
            # one JSON document over several lines (its first line, `{`, is every such file's): known by all of
            # its bytes, so a new document under an old name is a new file
            fid = trace_id(adapter.name, "doc:" + state.digest())
            row = self.ledger.by_id.get(fid)
        if any(pending.file_id == fid for pending in self._in_flight()):
            self.flush()  # the same file under a second name in this run: count what the first one gave first
            row = self.ledger.by_id.get(fid)
        if known is not None and known["file_id"] != fid:
            retire.append(known["file_id"])  # a waiting or failed row of this name, or a document it held before
        before = row["bytes_consumed"] if row is not None else 0
        if row is not None and row["status"] == "complete" and state.consumed == before:
            # the same bytes (touched, renamed or copied): nothing new
            self._event(
                None,
                {
                    **row,
                    "landing": self.landing,
                    "file_name": name,
                    "size_bytes": st.st_size,
                    "mtime_ns": st.st_mtime_ns,
                    "finished_at": self.now,
                    "replaces": sorted(set(retire) - {fid}),
                },
            )
            return
        conv = convert_lines(adapter, lines, self.config.adapters.settings(), self._partners(adapter.name, name))
        if conv.waiting is not None:
            self._hold(entry, st, retire, known, f"{name}: {conv.waiting}; converted when it settles (or --final)")
            return
        if conv.error is not None:
            self._trace_failed(entry, st, retire, row, "adapter_failed", f"{name}: {conv.error}; nothing of it read")
            return
        f = self._file(entry, st, fid, row, sorted(set(retire) - {fid}))
        f.state = state
        skip = f.tally.lines_read  # items given on an earlier run (all of them, or up to a crash)
        self.summary.files_read += 1
        self.summary.trace_files += 1
        self.summary.lines_read += sum(1 for line in lines if line.end > before)
        self.summary.bytes_read += state.consumed - before
        by_no = {line.no: line for line in lines}
        fresh = conv.items[skip:]
        self.summary.calls_converted += len(fresh)
        calls_on = Counter(item.line_no for item in conv.items if isinstance(item, Call))
        for item in fresh:
            self._add(f, self._trace_item(item, by_no[item.line_no], calls_on[item.line_no]))
        f.status = "complete"
        f.detail = conv.describe()
        if skip > len(conv.items):
            f.detail += f"; it gave {skip} items before and {len(conv.items)} now: nothing new taken"
        self.files[id(f)] = f
        self._ledger_row(f)

    def _partners(self, format: str, name: str) -> Partners | None:
        """The landing folder's other files of a format whose calls take pieces from other files (read once per
        run, when a file of it is converted)."""
        if self.partners is None:
            self.partners = landing_partners(self.root, self.config, final=self.final)
        found = self.partners.get(format)
        return without(found, name) if found is not None else None

    def _trace_item(self, item: Call | LineReject, source: Line, calls_on_line: int) -> _Item:
        """An item as a batch takes it: a call's record as a line-equivalent, or a reject with what its row keeps:
        the item's own part of the line, never another call's (a whole line only when nothing else is on it)."""
        if isinstance(item, Call):
            lines = item.lines
            if item.reason is None:
                raw, problem = record_line(item)
                if raw is not None:
                    return _Item(
                        Line(item.line_no, raw, source.end, len(raw)), None, item.request_id, lines, item.files
                    )
                reject = Reject(ADAPTER_ERROR, problem or "unconvertible record")
            else:
                reject = Reject(item.reason or ADAPTER_ERROR, item.detail or "")
            kept = _own_part(item.part, source, calls_on_line)
            return _Item(kept, reject, item.request_id, lines, item.files)
        return _Item(_own_part(item.part, source, 0), Reject(item.reason, item.detail))

    def _read_whole(self, entry: Entry, fh: BinaryIO, state: ReadState) -> list[Line]:
        """Every line of the file with its last one, bounded by [adapters].max_file_bytes of content."""
        fh.seek(0)
        bound = self.config.adapters.max_file_bytes
        lines: list[Line] = []
        total = 0
        for line in read_lines(
            open_stream(fh, entry.compressed),
            state,
            max_line_bytes=self.limits.max_line_bytes,
            max_inflated_bytes=self.limits.max_decompressed_bytes if entry.compressed else None,
            final=True,
        ):
            total += line.length
            if total > bound:
                raise TraceFileTooLarge(
                    f"a trace file is read whole, and this one holds more than {bound:,} bytes "
                    "(the bound is [adapters].max_file_bytes)"
                )
            lines.append(line)
        return lines

    def _prefix_matches(self, entry: Entry, fh: BinaryIO, row: dict) -> bool:
        """Are the bytes converted before (row) still the file's first bytes?"""
        nbytes = row["bytes_consumed"] or 0
        if nbytes == 0:
            return True
        fh.seek(0)
        try:
            return prefix_matches(open_stream(fh, entry.compressed), nbytes, row["file_sha256"] or "")
        except READ_ERRORS:
            return False

    def _hold(self, entry: Entry, st: os.stat_result, retire: list[str], row: dict | None, detail: str) -> None:
        """A trace file not settled yet: waiting, with what an earlier run converted of it kept."""
        self.summary.files_waiting += 1
        self.summary.bytes_held += st.st_size - (row["bytes_consumed"] if row else 0)
        if row is None:
            row = ledger_row(
                file_id=path_id(self.landing, entry.name),
                landing=self.landing,
                name=entry.name,
                status="waiting",
                now=self.now,
            )
            prior = self.ledger.by_id.get(row["file_id"])
            if prior is not None and (prior["status"], prior["size_bytes"], prior["mtime_ns"]) == (
                "waiting",
                st.st_size,
                st.st_mtime_ns,
            ):
                return
            retire = [i for i in retire if i != row["file_id"]]
        self._event(
            None,
            {
                **row,
                "landing": self.landing,
                "file_name": entry.name,
                "size_bytes": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "status": "waiting",
                "detail": detail,
                "finished_at": self.now,
                "replaces": sorted(set(retire)),
            },
        )

    def _trace_failed(
        self, entry: Entry, st: os.stat_result, retire: list[str], row: dict | None, reason: str, detail: str
    ) -> None:
        """A trace file that cannot be converted at this size: one reject row, looked at again when it changes; what
        an earlier run took of it stays counted."""
        if row is None:
            row = ledger_row(
                file_id=path_id(self.landing, entry.name),
                landing=self.landing,
                name=entry.name,
                status="failed",
                now=self.now,
            )
            retire = [i for i in retire if i != row["file_id"]]
        prior = self.ledger.by_id.get(row["file_id"])
        if prior is not None and (prior["status"], prior["size_bytes"], prior["mtime_ns"], prior["detail"]) == (
            "failed",
            st.st_size,
            st.st_mtime_ns,
            detail,
        ):
            return
        self._event(
            self._file_reject(entry.name, reason, detail),
            {
                **row,
                "landing": self.landing,
                "file_name": entry.name,
                "size_bytes": st.st_size,
                "mtime_ns": st.st_mtime_ns,
                "status": "failed",
                "detail": detail,
                "finished_at": self.now,
                "replaces": sorted(set(retire)),
            },
        )


def _own_part(part: str | None, source: Line, calls_on_line: int) -> Line:
    """What a trace item's reject row keeps, as the line it is given with: the adapter's part (the item's own
    spans or records), else the source line when it holds no other call, else a note that it was not kept."""
    if part is None and calls_on_line > 1:
        part = json.dumps(
            {"line": source.no, "not_kept": f"the line holds {calls_on_line} calls; it is not kept for one of them"}
        )
    if part is None:
        return source
    raw = part.encode("utf-8", "surrogatepass")
    return Line(source.no, raw, source.end, len(raw))
