"""Which UTC days a landing folder holds, without ingesting it (for `citegate run` with no dates)."""

from __future__ import annotations

import gzip
import re
from datetime import date, datetime, timezone
from pathlib import Path

from .ingest import LOG_SUFFIXES

_LOGGED_AT = re.compile(rb'"logged_at"\s*:\s*"([^"]{10,40})"')


def days_in_landing(landing: str | Path, known: dict[str, tuple[int, set[date]]] | None = None) -> set[date]:
    """UTC dates of logged_at over every log file; `known` maps an ingested file name to (size, days)."""
    known = known or {}
    days: set[date] = set()
    for path in sorted(Path(landing).iterdir()):
        if path.name.startswith(".") or not path.name.endswith(LOG_SUFFIXES) or not path.is_file():
            continue
        size_days = known.get(path.name)
        if size_days and size_days[0] == path.stat().st_size:
            days |= size_days[1]
            continue
        days |= _scan(path)
    return days


def _scan(path: Path) -> set[date]:
    found: set[date] = set()
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            for line in fh:
                m = _LOGGED_AT.search(line)
                if m is None:
                    continue
                try:
                    ts = datetime.fromisoformat(m.group(1).decode("ascii"))
                except (ValueError, UnicodeDecodeError):
                    continue
                if ts.tzinfo is not None:
                    found.add(ts.astimezone(timezone.utc).date())
    except (EOFError, OSError):
        pass  # a corrupt file still gets its reject row at ingest
    return found
