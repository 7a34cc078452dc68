"""The lake: the large per-day tables as Hive-layout Parquet partitions beside the warehouse (docs/scaling.md).

    <lake>/<table>/day=YYYY-MM-DD/part-<generation>.parquet      (metric_lineage: week_start=YYYY-MM-DD)
    <lake>/_manifest.json                                        the files in force, rewritten by rename
    <lake>/_manifests/<generation>.json                          one per publish, kept while a reader may need it

A partition file is never modified: a changed partition gets a new file under a new generation name, the
manifest and the published DuckDB file name exact files, and a file is deleted only once no manifest a
reader may still hold (the previous publish's or a newer one) names it. The partition column is in the
path only (Hive convention: Spark and Trino refuse a column that is both in the path and in the file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb

from citegate_assets.lib.durable import fsync_dir, fsync_file
from citegate_assets.lib.warehouse import sql_identifier, sql_literal

MANIFEST = "_manifest.json"
MANIFESTS = "_manifests"
FORMAT = 1


@dataclass(frozen=True)
class LakeTable:
    name: str
    column: str  # the partition column (a date): day, or week_start for metric_lineage
    # an aggregate that changes whenever the partition is rewritten or updated (a re-run with the same row
    # count shows); only these columns and the partition column are read to decide what to write
    stamp: str | None


# The tables that grow with traffic and are written per day (or per week, for the lineage). Everything else
# is small, or has no day for every row (ingest_rejects, prompt_conflicts), and is copied into the
# published file.
LAKE_TABLES: tuple[LakeTable, ...] = (
    LakeTable("prompts", "day", "max(ingested_at)"),
    LakeTable("prompt_sections", "day", None),
    LakeTable("retrievals", "day", None),
    LakeTable("citations", "day", None),
    LakeTable("provenance_results", "day", "max(checked_at)"),
    LakeTable("support_sample", "day", None),
    LakeTable("numeric_checks", "day", "max(checked_at)"),
    LakeTable("support_verdicts", "day", "max(judged_at)"),
    LakeTable("best_evidence", "day", "max(computed_at)"),
    LakeTable("answer_rejects", "day", "max(rejected_at)"),
    # a review decision updates an old day's entries in place (sql/review/refresh_status.sql), whatever its time
    LakeTable(
        "citation_queue",
        "day",
        "max(queued_at)::varchar || ':' || bit_xor(hash(citation_id, status, escalation_cause, reviewed_by, "
        "reviewed_at))::varchar",
    ),
    LakeTable("metric_lineage", "week_start", None),
)
LAKE_TABLE_NAMES = frozenset(t.name for t in LAKE_TABLES)


class LakeError(RuntimeError):
    pass


def new_generation() -> str:
    """A name for this publish's files: sortable by time, unique per process."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ") + f"-{os.getpid()}"


def read_manifest(lake: Path) -> dict:
    path = Path(lake) / MANIFEST
    if not path.exists():
        return {"format": FORMAT, "generation": None, "tables": {}}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LakeError(f"{path}: not a lake manifest ({exc}); remove it to re-export every partition") from None
    if manifest.get("format") != FORMAT:
        raise LakeError(f"{path}: manifest format {manifest.get('format')!r}, this citegate reads {FORMAT}")
    return manifest


def manifest_files(manifest: dict) -> set[str]:
    """The files a manifest names, relative to the lake root."""
    return {part["file"] for table in manifest["tables"].values() for part in table["parts"].values()}


def current_files(lake: Path, table: str) -> list[Path]:
    """The files in force for a table, from the manifest: what a direct reader (polars, Spark) should read."""
    entry = read_manifest(lake)["tables"].get(table)
    if entry is None:
        raise LakeError(f"{lake}: the lake has no table {table!r} (publish first)")
    return [Path(lake) / part["file"] for _, part in sorted(entry["parts"].items())]


def export_changed(
    con: duckdb.DuckDBPyConnection,
    lake: Path,
    *,
    generation: str,
    force_days: Iterable[date] = (),
) -> tuple[dict, dict[str, list[str]]]:
    """Write a new file for every partition that differs from the manifest; return (new manifest, written).

    A partition differs when it is new, its row count or its stamp changed, the table's columns changed (a
    migration: every partition is rewritten), or its day is in force_days (the run's days: a re-run day is
    rewritten even when nothing about it looks different). Partitions gone from the warehouse leave the
    manifest. Nothing is deleted here and the manifest on disk is not touched: publish_lake() does both once
    the published file that names the new files is in place. written: table -> partitions rewritten.
    """
    lake = Path(lake)
    old = read_manifest(lake)
    forced = {d.isoformat() for d in force_days}
    tables: dict[str, dict] = {}
    written: dict[str, list[str]] = {}
    _private_dir(lake)
    for spec in LAKE_TABLES:
        columns = _columns(con, spec.name)
        if not columns:
            raise LakeError(f"the warehouse has no table {spec.name}")
        before = old["tables"].get(spec.name, {})
        same_columns = before.get("columns") == columns
        parts: dict[str, dict] = {}
        changed: list[str] = []
        for part, rows, stamp in _fingerprints(con, spec):
            kept = before.get("parts", {}).get(part) if same_columns else None
            if (
                kept is None
                or not (lake / kept["file"]).is_file()  # a lake damaged by hand: write the partition again
                or kept["rows"] != rows
                or kept.get("stamp") != stamp
                or (spec.column == "day" and part in forced)
            ):
                kept = _write_part(con, lake, spec, part, rows, stamp, generation)
                changed.append(part)
            parts[part] = kept
        tables[spec.name] = {"partition_column": spec.column, "columns": columns, "parts": parts}
        written[spec.name] = changed
    return {"format": FORMAT, "generation": generation, "tables": tables}, written


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[list[str]]:
    rows = con.execute(
        "select column_name, data_type from duckdb_columns() "
        "where database_name = current_database() and schema_name = 'main' and table_name = $t "
        "order by column_index",
        {"t": table},
    ).fetchall()
    return [[name, kind] for name, kind in rows]


def _fingerprints(con: duckdb.DuckDBPyConnection, spec: LakeTable) -> list[tuple[str, int, str | None]]:
    """(partition, rows, stamp) per partition; reads only the partition and stamp columns."""
    if spec.name == "metric_lineage":
        sql = (
            "select t.week_start, count(*), any_value(i.computed_at)::varchar from metric_lineage t "
            "left join metric_week_inputs i on i.week_start = t.week_start group by t.week_start order by 1"
        )
    else:
        stamp = f"({spec.stamp})::varchar" if spec.stamp else "null"
        sql = (
            f"select {spec.column}, count(*), {stamp} from {spec.name} "
            f"where {spec.column} is not null group by {spec.column} order by 1"
        )
    return [(part.isoformat(), n, s) for part, n, s in con.sql(sql).fetchall()]


def _write_part(
    con: duckdb.DuckDBPyConnection,
    lake: Path,
    spec: LakeTable,
    part: str,
    rows: int,
    stamp: str | None,
    generation: str,
) -> dict:
    """One partition to its own new file: written under a temporary name, checked, made durable, renamed."""
    relative = f"{spec.name}/{spec.column}={part}/part-{generation}.parquet"
    final = lake / relative
    _private_dir(final.parent)
    tmp = final.with_name(final.name + ".tmp")
    tmp.unlink(missing_ok=True)
    try:
        [(copied,)] = con.execute(
            f"copy (select * exclude ({spec.column}) from {spec.name} where {spec.column} = $part) "
            f"to {sql_literal(tmp)} (format parquet, compression zstd)",
            {"part": date.fromisoformat(part)},
        ).fetchall()
        if copied != rows:
            raise LakeError(f"{spec.name} {spec.column}={part}: wrote {copied} rows, the warehouse has {rows}")
        os.chmod(tmp, 0o600)
        fsync_file(tmp)
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(final.parent)
    return {"file": relative, "rows": rows, "stamp": stamp}


def view_sql(lake: Path, table: str, entry: dict) -> str | None:
    """The select a published view runs: exactly the manifest's files, columns in the warehouse's order and
    types. None when the table has no partition yet (the caller creates an empty table instead)."""
    files = [str((Path(lake) / part["file"]).resolve()) for _, part in sorted(entry["parts"].items())]
    if not files:
        return None
    column = entry["partition_column"]
    select = ", ".join(f"{sql_identifier(name)}::{kind} as {sql_identifier(name)}" for name, kind in entry["columns"])
    listed = ", ".join(sql_literal(Path(f)) for f in files)
    return (
        f"select {select} from read_parquet([{listed}], hive_partitioning = true, "
        f"hive_types = {{'{column}': date}}, union_by_name = true)"
    )


def write_manifest(lake: Path, manifest: dict) -> Path:
    """`_manifest.json`, replaced by rename: a direct reader sees the previous publish's files or these."""
    path = Path(lake) / MANIFEST
    _write_json(path, manifest)
    return path


def record_generation(lake: Path, manifest: dict) -> None:
    """`_manifests/<generation>.json`, before the published file is renamed into place: a crash before the
    rename still leaves these files protected from garbage collection until a later publish succeeds."""
    history = Path(lake) / MANIFESTS
    _private_dir(history)
    _write_json(history / f"{manifest['generation']}.json", manifest)


def _write_json(path: Path, document: dict) -> None:
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.chmod(tmp, 0o600)
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def collect_garbage(lake: Path, previous_generation: str | None) -> list[str]:
    """Delete partition files no reader can need: those named by no manifest of the previous published
    generation or a newer one. A reader holding the previous published file keeps working; one holding an
    older file may not. Returns the removed files (relative to the lake)."""
    lake = Path(lake)
    history = sorted((lake / MANIFESTS).glob("*.json"))
    keep_from = previous_generation or ""
    keep: set[str] = set()
    for path in history:
        if path.stem >= keep_from:
            keep |= manifest_files(json.loads(path.read_text(encoding="utf-8")))
    removed = []
    for spec in LAKE_TABLES:
        root = lake / spec.name
        if not root.is_dir():
            continue
        for file in sorted(root.rglob("*")):
            relative = file.relative_to(lake).as_posix()
            if file.is_file() and relative not in keep:
                file.unlink()
                removed.append(relative)
        for folder in sorted((p for p in root.iterdir() if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
    for path in history:
        if path.stem < keep_from:
            path.unlink()
    for leftover in [*lake.glob(f"{MANIFEST}.tmp-*"), *(lake / MANIFESTS).glob("*.tmp-*")]:
        leftover.unlink()  # a manifest a crashed publish was writing (the run lock: no other publish is live)
    return removed


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)  # prompts hold user data: the owner only
