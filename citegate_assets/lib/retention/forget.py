"""`citegate forget --request-id ID…`: remove requests' text everywhere citegate holds it (docs/retention.md).

The working warehouse first (the same updates as retention, scoped by request, plus the judge cache entries on the
request's claims), one audit row per request in forgotten_requests (ids, counts, who, why: no text). Then the
published copy is rebuilt with the requests' days rewritten in the lake's Delta tables, and every data file their latest
versions do not name is deleted at once: unlike a nightly publish, a reader still holding the previous published file
may lose it.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import duckdb

from citegate_assets.lib.core.runlock import run_lock
from citegate_assets.lib.retention.drop_text import drop_text
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage.file_rewrite import Rewrite, mark_text_removed, rewrite_if_text_removed
from citegate_assets.lib.storage.publish import publish_lake
from citegate_assets.lib.storage.text_store import sweep
from citegate_assets.lib.storage.warehouse import connect, ensure_schema, query, run_script, transaction


@dataclass(frozen=True)
class Pointer:
    """A line outside the warehouse that still holds a forgotten request's text."""

    request_id: str
    file: str
    line: int
    what: str  # prompt | conflicting prompt | rejected line | review | own label


@dataclass
class ForgetResult:
    forgotten: dict[str, dict[str, int]] = field(default_factory=dict)  # request id -> rows per table
    unknown: list[str] = field(default_factory=list)
    pointers: list[Pointer] = field(default_factory=list)
    days: list[date] = field(default_factory=list)
    published: dict | None = None
    removed_files: list[str] = field(default_factory=list)
    rewrite: Rewrite | None = None  # the working file rewritten without the freed blocks that held the text


def forgetter(by: str | None) -> str:
    """Who forgets: --by, else $USER, else the login name."""
    return by or os.environ.get("USER") or getpass.getuser()


def forget_in_warehouse(
    con: duckdb.DuckDBPyConnection, request_ids: Iterable[str], *, by: str, reason: str | None, now: datetime
) -> ForgetResult:
    """Drop the known requests' text from the working warehouse and record one audit row each (one transaction)."""
    wanted = list(dict.fromkeys(request_ids))  # the order given, once each
    result = ForgetResult()
    with transaction(con):
        known = {r for (r,) in query(con, "retention/known_requests", {"ids": wanted}).fetchall()}
        result.unknown = [r for r in wanted if r not in known]
        ids = [r for r in wanted if r in known]
        result.days = [d for (d,) in query(con, "retention/request_days", {"ids": ids}).fetchall()] if ids else []
        for request_id in ids:
            for file, line, what in query(con, "retention/landing_lines", {"request_id": request_id}).fetchall():
                result.pointers.append(Pointer(request_id, file, line, what))
            for file, line in query(con, "retention/review_lines", {"request_id": request_id}).fetchall():
                result.pointers.append(Pointer(request_id, file, line, "review"))
            for file, line in query(con, "retention/label_lines", {"request_id": request_id}).fetchall():
                result.pointers.append(Pointer(request_id, file, line, "own label"))
            [(first, last)] = query(con, "retention/request_span", {"request_id": request_id}).fetchall()
            span = (first, last) if first is not None else None
            rows = drop_text(con, request_ids=[request_id], span=span)
            result.forgotten[request_id] = rows
            run_script(
                con,
                "retention/record_forgotten",
                {
                    "request_id": request_id,
                    "forgotten_at": now,
                    "forgotten_by": by,
                    "reason": reason,
                    "rows_touched": json.dumps(rows, sort_keys=True),
                },
            )
        if any(any(rows.values()) for rows in result.forgotten.values()):
            mark_text_removed(con, "forget")
    con.execute("checkpoint")  # the updated blocks are written now, not left in the WAL
    sweep(con)  # the text files that held the requests' prompts, rewritten without them (lib/storage/text_store.py)
    return result


def forget(
    warehouse: Path,
    published: Path,
    lake: Path | str,  # a folder, or an s3:// URI (lib/storage/lake_store.py)
    request_ids: Iterable[str],
    *,
    by: str,
    reason: str | None,
    now: datetime,
) -> ForgetResult:
    """Forget in the working warehouse, under the run lock (like calibrate), then publish and delete the lake
    files that held the requests' text. Nothing is published when no id is known."""
    warehouse = Path(warehouse)
    if not warehouse.is_file():
        raise FileNotFoundError(f"{warehouse}: no warehouse (nothing to forget)")
    with run_lock(warehouse, hint="try `citegate forget` again when it ends"):
        with connect(warehouse) as con:
            ensure_schema(con)
            result = forget_in_warehouse(con, request_ids, by=by, reason=reason, now=now)
        if result.forgotten:
            result.published = publish_lake(warehouse, published, lake, run_days=result.days)
            # every earlier version may hold the text: keep only the files the tables' latest versions name
            result.removed_files = lake_module.collect_garbage(lake, {}, purge_all=True)
        # the working file's freed blocks still hold the text (after the publish, which a failed rewrite must not stop)
        result.rewrite = rewrite_if_text_removed(warehouse)
    return result
