"""The landing ledger (`ingested_files`): what of each landing file has been read, keyed by the file's identity.

A file is known by its content, not its name: the sha256 of its first line (`file_id`). So a file renamed
by rotation (app.jsonl → app.jsonl.1) is the same file and is read on from where it stopped; a new
app.jsonl is a new file; two landing folders with equal names do not collide. A file whose first line is
also another file's, but whose earlier bytes differ from what was read, is a distinct file and gets an
identity that adds its folder and name. Entries that are not files to read get a row per name
(`entry:`), files with no complete first line yet a row per name (`path:`); a warehouse written before
identities existed has rows `legacy:<name>`, adopted when their file is read again.

A file in a trace format (docs/adapters.md) has the identity `trace:<format>:<first line's sha256>` (one JSON
document: `trace:<format>:doc:<sha256 of all of it>`). Its counts are of items, not lines: `lines_read` = the calls
and line rejects it gave = `records_ingested` + `records_rejected`; its `detail` says how many source lines it has
and what they hold (calls, no call, a line reject).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date, datetime

import duckdb
import polars as pl

from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP
from citegate_assets.lib.storage.warehouse import query

LEDGER_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "file_id": pl.String,
    "landing": pl.String,
    "file_name": pl.String,
    "file_sha256": pl.String,
    "size_bytes": pl.Int64,
    "mtime_ns": pl.Int64,
    "bytes_consumed": pl.Int64,
    "status": pl.String,
    "lines_read": pl.Int64,
    "records_ingested": pl.Int64,
    "records_rejected": pl.Int64,
    "answers_rejected": pl.Int64,
    "detail": pl.String,
    "first_seen_at": UTC_TIMESTAMP,
    "finished_at": UTC_TIMESTAMP,
    "days": pl.List(pl.Date),
    "replaces": pl.List(pl.String),  # rows this one supersedes (entry:, path: or legacy: rows of the same file)
}
# statuses: complete | partial (a run stopped mid-file) | waiting (an unterminated tail or an unfinished .gz held
# back) | failed (unreadable or too large at this size; read again when the file changes) | skipped (not a file to read)
DONE = ("complete", "failed")


@dataclass
class FileTally:
    """A file's counts so far: lines read = records ingested + records rejected (a trace file: items, not lines)."""

    lines_read: int = 0
    records_ingested: int = 0
    records_rejected: int = 0
    answers_rejected: int = 0


def entry_id(landing: str, name: str) -> str:
    return f"entry:{landing}/{name}"


def path_id(landing: str, name: str) -> str:
    return f"path:{landing}/{name}"


def trace_id(format_name: str, identity: str) -> str:
    """A trace-format file's identity: its format and its first line's (or, for one JSON document, its bytes')."""
    return f"trace:{format_name}:{identity}"


def distinct_id(fingerprint: str, landing: str, name: str) -> str:
    return hashlib.sha256(f"{fingerprint}\0{landing}\0{name}".encode("utf-8", "surrogateescape")).hexdigest()


@dataclass
class Ledger:
    """Every ledger row, loaded once per run; lookups by identity and by where a file was last seen."""

    by_id: dict[str, dict] = field(default_factory=dict)
    by_place: dict[tuple[str | None, str], dict] = field(default_factory=dict)

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection) -> "Ledger":
        rel = query(con, "ingest/ledger")
        ledger = cls()
        for values in rel.fetchall():
            ledger.remember(dict(zip(rel.columns, values)))
        return ledger

    def remember(self, row: dict) -> None:
        self.by_id[row["file_id"]] = row
        for old in row.get("replaces") or ():
            gone = self.by_id.pop(old, None)
            if gone is not None and self.by_place.get((gone["landing"], gone["file_name"])) is gone:
                del self.by_place[(gone["landing"], gone["file_name"])]
        if not row["file_id"].startswith("entry:"):
            self.by_place[(row["landing"], row["file_name"])] = row

    def at(self, landing: str, name: str) -> dict | None:
        return self.by_place.get((landing, name))

    def legacy(self, name: str) -> dict | None:
        return self.by_id.get(f"legacy:{name}")


def ledger_row(
    *,
    file_id: str,
    landing: str,
    name: str,
    status: str,
    now: datetime,
    first_seen: datetime | None = None,
    sha256: str | None = None,
    size: int | None = None,
    mtime_ns: int | None = None,
    consumed: int = 0,
    tally: FileTally | None = None,
    detail: str | None = None,
    days: set[date] | None = None,
    replaces: list[str] | None = None,
) -> dict:
    return {
        "file_id": file_id,
        "landing": landing,
        "file_name": name,
        "file_sha256": sha256,
        "size_bytes": size,
        "mtime_ns": mtime_ns,
        "bytes_consumed": consumed,
        "status": status,
        "lines_read": tally.lines_read if tally else 0,
        "records_ingested": tally.records_ingested if tally else 0,
        "records_rejected": tally.records_rejected if tally else 0,
        "answers_rejected": tally.answers_rejected if tally else 0,
        "detail": detail,
        "first_seen_at": first_seen or now,
        "finished_at": None if status == "partial" else now,
        "days": sorted(days or ()),
        "replaces": list(replaces or ()),
    }


def ledger_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=LEDGER_SCHEMA) if rows else pl.DataFrame(schema=LEDGER_SCHEMA)
