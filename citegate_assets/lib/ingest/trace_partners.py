"""The landing folder's trace files as partners of one another: a format whose calls take pieces from other files
(otlp: the OpenTelemetry file exporter writes spans and log records to files of their own, and the older GenAI
conventions put message content in log records) is converted with what every other file of its format offers.

Each file of such a format is read whole (as a trace file is: up to [adapters].max_file_bytes) and given to its
adapter's `partner`, which keeps only what other files may need (otlp: GenAI events by trace and span id, and its
own inference span ids). A file that is not settled (changed within [ingest].settle_seconds, and not --final) is
marked with its last change, so a call with no content yet waits for it (lib/ingest/adapters/otlp.py says when). A file
that cannot be read, or is over the bound, offers nothing: its own conversion reports it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from citegate_assets.lib.core.lines import READ_ERRORS, DecompressedTooLarge, Line, ReadState, open_stream, read_lines
from citegate_assets.lib.ingest.adapters import HEAD_BYTES, Partner, Partners, detect, read_head
from citegate_assets.lib.ingest.landing import OutsideLanding, landing_entries, open_entry
from citegate_assets.lib.ingest.settings import IngestSettings

BOM = b"\xef\xbb\xbf"


def landing_partners(
    root: Path, config: IngestSettings, *, final: bool, now: float | None = None
) -> dict[str, Partners]:
    """format -> the partners of the folder's files of that format (only formats whose adapter joins)."""
    now = time.time() if now is None else now
    found: dict[str, list[Partner]] = {}
    for entry in landing_entries(root):
        if entry.reason:
            continue
        try:
            with open_entry(root, entry) as (fh, st):
                first = next(_lines(fh, entry.compressed, config), None)
                if first is None or first.too_long:
                    continue
                fh.seek(0)
                item = detect(first.raw, read_head(open_stream(fh, entry.compressed), HEAD_BYTES))
                offer = getattr(item, "partner", None)
                if item is None or not callable(offer):
                    continue  # only a joining format's files are read whole
                lines = _whole(fh, entry.compressed, config)
                given = [
                    (line.no, line.raw.removeprefix(BOM) if line.no == 1 else line.raw)
                    for line in lines
                    if not line.too_long
                ]
                settled = final or now - st.st_mtime >= config.ingest.settle_seconds
                content = offer(iter(given))
        except (OSError, OutsideLanding, DecompressedTooLarge, _TooLarge, *READ_ERRORS):
            continue
        except Exception:  # noqa: BLE001 — a file its adapter cannot read offers nothing; its own conversion says why
            continue
        found.setdefault(item.name, []).append(Partner(entry.name, None if settled else st.st_mtime_ns, content))
    settle_ns = int(config.ingest.settle_seconds * 1_000_000_000)
    return {name: Partners(tuple(files), settle_ns) for name, files in found.items()}


def without(partners: Partners, name: str) -> Partners:
    """The partners of the file `name`: every other file."""
    return Partners(tuple(p for p in partners.files if p.name != name), partners.settle_ns)


class _TooLarge(Exception):
    pass


def _lines(fh: BinaryIO, compressed: bool, config: IngestSettings) -> Iterator[Line]:
    fh.seek(0)
    return read_lines(
        open_stream(fh, compressed),
        ReadState(),
        max_line_bytes=config.ingest.max_line_bytes,
        max_inflated_bytes=config.ingest.max_decompressed_bytes if compressed else None,
        final=True,
    )


def _whole(fh: BinaryIO, compressed: bool, config: IngestSettings) -> list[Line]:
    """Every line, as a trace file is read: whole, up to [adapters].max_file_bytes."""
    lines: list[Line] = []
    total = 0
    for line in _lines(fh, compressed, config):
        total += line.length
        if total > config.adapters.max_file_bytes:
            raise _TooLarge()
        lines.append(line)
    return lines
