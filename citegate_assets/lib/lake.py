"""The lake: the large per-day tables as Hive-layout Parquet partitions beside the warehouse (docs/scaling.md).

    <lake>/<table>/day=YYYY-MM-DD/part-<generation>.parquet      (metric_lineage: week_start=YYYY-MM-DD)
    <lake>/_manifest.json                                        the files in force, replaced atomically
    <lake>/_manifests/<generation>.json                          one per publish, kept while a reader may need it

The lake is a folder or an s3:// URI (lib/lake_store.py): `_manifest.json` is replaced only if it is still the
version this publish read (a conditional put on S3), so two publishers never silently overwrite each other.

A partition file is never modified: a changed partition gets a new file under a new generation name, the
manifest and the published DuckDB file name exact files, and a file is deleted only once no manifest a
reader may still hold (the previous publish's or a newer one) names it. The partition column is in the
path only (Hive convention: Spark and Trino refuse a column that is both in the path and in the file).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TypeAlias

import duckdb

from citegate_assets.lib.lake_store import LakeConflict, LakeStore, is_uri, open_store
from citegate_assets.lib.text_store import streamed_text
from citegate_assets.lib.warehouse import sql_identifier, sql_literal

# a partition's rows are written a row group at a time: the writer holds one, not the whole day (a day of prompt
# text is gigabytes at 100,000 requests)
ROW_GROUP_BYTES = "32MB"

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
    stamp_table: str | None = None  # where the stamp is read, when not the table itself (a view over a table)


# The tables that grow with traffic and are written per day (or per week, for the lineage). Everything else
# is small, or has no day for every row (ingest_rejects, prompt_conflicts), and is copied into the
# published file.
LAKE_TABLES: tuple[LakeTable, ...] = (
    # the count(<text column>) terms: retention and forget null text in place (lib/retention.py)
    # read from prompt_rows: the view would read every prompt's text to count it (schema 12, lib/text_store.py)
    LakeTable(
        "prompts",
        "day",
        "max(ingested_at)::varchar || ':' || count(coalesce(prompt_raw, text_file))::varchar",
        stamp_table="prompt_rows",
    ),
    LakeTable("prompt_sections", "day", None),
    LakeTable("retrievals", "day", "count(text)::varchar"),
    # a span-less citation (schema 17) has a claim and no span: counted by either
    LakeTable("citations", "day", "count(coalesce(span, claim))::varchar || ':' || count(location_mismatch)::varchar"),
    LakeTable("provenance_results", "day", "max(checked_at)"),
    LakeTable("support_sample", "day", None),
    LakeTable("numeric_checks", "day", "max(checked_at)"),
    LakeTable("support_verdicts", "day", "max(judged_at)::varchar || ':' || count(raw_answer)::varchar"),
    LakeTable("best_evidence", "day", "max(computed_at)"),
    LakeTable("answer_rejects", "day", "max(rejected_at)::varchar || ':' || count(raw_field)::varchar"),
    # a review decision updates an old day's entries in place (sql/review/refresh_status.sql), whatever its time
    LakeTable(
        "citation_queue",
        "day",
        "max(queued_at)::varchar || ':' || bit_xor(hash(citation_id, status, escalation_cause, reviewed_by, "
        "reviewed_at))::varchar || ':' || count(claim)::varchar",
    ),
    LakeTable("metric_lineage", "week_start", None),
)
LAKE_TABLE_NAMES = frozenset(t.name for t in LAKE_TABLES)


class LakeError(RuntimeError):
    pass


# a lake root: a folder, an s3:// URI, or a store opened from one
Lake: TypeAlias = LakeStore | str | os.PathLike


def new_generation() -> str:
    """A name for this publish's files: sortable by time, unique per process."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ") + f"-{os.getpid()}"


def read_manifest(lake: Lake) -> dict:
    return read_manifest_versioned(lake)[0]


def read_manifest_versioned(lake: Lake) -> tuple[dict, str | None]:
    """The manifest in force and its version token (None: no manifest yet), for write_manifest()."""
    store = open_store(lake)
    found = store.read(MANIFEST)
    if found is None:
        return {"format": FORMAT, "generation": None, "tables": {}}, None
    data, token = found
    where = store.url(MANIFEST)
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LakeError(f"{where}: not a lake manifest ({exc}); remove it to re-export every partition") from None
    if manifest.get("format") != FORMAT:
        raise LakeError(f"{where}: manifest format {manifest.get('format')!r}, this citegate reads {FORMAT}")
    return manifest, token


def manifest_files(manifest: dict) -> set[str]:
    """The files a manifest names, relative to the lake root."""
    return {part["file"] for table in manifest["tables"].values() for part in table["parts"].values()}


def current_urls(lake: Lake, table: str) -> list[str]:
    """The files in force for a table, from the manifest (paths, or s3:// URLs): what a direct reader
    (polars, Spark) should read."""
    store = open_store(lake)
    entry = read_manifest(store)["tables"].get(table)
    if entry is None:
        raise LakeError(f"{store.root}: the lake has no table {table!r} (publish first)")
    return [store.url(part["file"]) for _, part in sorted(entry["parts"].items())]


def current_files(lake: Path, table: str) -> list[Path]:
    """current_urls() of a lake in a folder, as paths."""
    if is_uri(lake):
        raise LakeError(f"{lake}: not a folder; use current_urls() for a lake on object storage")
    return [Path(url) for url in current_urls(lake, table)]


def export_changed(
    con: duckdb.DuckDBPyConnection,
    lake: Lake,
    *,
    generation: str,
    force_days: Iterable[date] = (),
    old: dict | None = None,
) -> tuple[dict, dict[str, list[str]]]:
    """Write a new file for every partition that differs from the manifest; return (new manifest, written).

    A partition differs when it is new, its row count or its stamp changed, the table's columns changed (a
    migration: every partition is rewritten), its file is missing or not the size it was written with, or its
    day is in force_days (the run's days: a re-run day is rewritten even when nothing about it looks
    different). Partitions gone from the warehouse leave the manifest. Each part records the rows and bytes
    checked when its file was written, so a publish counts an unchanged file without reading it (publish.py).
    Nothing is deleted here and the manifest in the lake is not touched: publish_lake() does both once the
    published file that names the new files is in place. old: the manifest in force (read here when None).
    written: table -> partitions rewritten.
    """
    store = open_store(lake)
    old = read_manifest(store) if old is None else old
    forced = {d.isoformat() for d in force_days}
    tables: dict[str, dict] = {}
    written: dict[str, list[str]] = {}
    store.prepare()
    for spec in LAKE_TABLES:
        columns = _columns(con, spec.name)
        if not columns:
            raise LakeError(f"the warehouse has no table {spec.name}")
        before = old["tables"].get(spec.name, {})
        same_columns = before.get("columns") == columns
        present = store.sizes(f"{spec.name}/")  # one listing per table, not one request per partition
        parts: dict[str, dict] = {}
        changed: list[str] = []
        for part, rows, stamp in _fingerprints(con, spec):
            kept = before.get("parts", {}).get(part) if same_columns else None
            size = present.get(kept["file"]) if kept is not None else None
            if kept is not None and size is not None and "bytes" not in kept:
                kept = {**kept, "bytes": size}  # written by a citegate that did not record sizes: as listed
            if (
                kept is None
                or size is None  # missing or resized (a lake damaged by hand): write the partition again
                or size != kept["bytes"]
                or kept["rows"] != rows
                or kept.get("stamp") != stamp
                or (spec.column == "day" and part in forced)
            ):
                kept = _write_part(con, store, spec, part, rows, stamp, generation, columns)
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
            f"select {spec.column}, count(*), {stamp} from {spec.stamp_table or spec.name} "
            f"where {spec.column} is not null group by {spec.column} order by 1"
        )
    return [(part.isoformat(), n, s) for part, n, s in con.sql(sql).fetchall()]


def _write_part(
    con: duckdb.DuckDBPyConnection,
    store: LakeStore,
    spec: LakeTable,
    part: str,
    rows: int,
    stamp: str | None,
    generation: str,
    columns: list[list[str]],
) -> dict:
    """One partition to its own new object: written by DuckDB to a local temporary file, its row count
    checked, then renamed into place durably (a folder) or uploaded and its size checked (S3). Each column
    carries a Parquet field id (_field_ids), so a view binds from the manifest, not from a file's footer."""
    relative = f"{spec.name}/{spec.column}={part}/part-{generation}.parquet"
    tmp = store.staging(relative)
    ids = ", ".join(f"{sql_literal(name)}: {i}" for i, (name, _) in _field_ids(columns, spec.column))
    try:
        # the prompts' text is streamed from its files, not held (text_store.py streamed_text)
        prompts = spec.name == "prompts"
        rows_of = "prompts_between($part, $part + 1)" if prompts else spec.name
        with streamed_text(con) if prompts else nullcontext():
            [(copied,)] = con.execute(
                f"copy (select * exclude ({spec.column}) from {rows_of} where {spec.column} = $part) "
                f"to {sql_literal(tmp)} (format parquet, compression zstd, field_ids {{{ids}}}, "
                f"row_group_size_bytes {sql_literal(ROW_GROUP_BYTES)})",
                {"part": date.fromisoformat(part)},
            ).fetchall()
        if copied != rows:
            raise LakeError(f"{spec.name} {spec.column}={part}: wrote {copied} rows, the warehouse has {rows}")
        size = tmp.stat().st_size
        store.commit_file(relative, tmp)  # checks the stored size on S3
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return {"file": relative, "rows": rows, "bytes": size, "stamp": stamp, "field_ids": True}


def _field_ids(columns: list[list[str]], partition_column: str) -> list[tuple[int, list[str]]]:
    """(Parquet field id, [name, type]) of a partition file's columns: 1-based positions among the table's
    columns, which every part of a table shares (a change of columns rewrites every part)."""
    return [(i, column) for i, column in enumerate(columns, 1) if column[0] != partition_column]


def manifest_rows(entry: dict) -> int:
    """The rows of a table's manifest entry: each part's count, checked when its file was written."""
    return sum(part["rows"] for part in entry["parts"].values())


def view_sql(lake: Lake, table: str, entry: dict) -> str | None:
    """The select a published view runs: exactly the manifest's files (absolute paths or s3:// URLs), columns
    in the warehouse's order and types. None when the table has no partition yet (the caller creates an empty
    table instead). Creating the view reads no file's footer when every part carries the manifest's field ids
    (written so since they were recorded): read_parquet's `schema` maps them to the columns. Otherwise it reads
    the first file's only (no union_by_name: every part of a table was written with the manifest's columns, a
    change of columns rewriting every part; a file that differed would fail the query, naming it)."""
    store = open_store(lake)
    parts = [part for _, part in sorted(entry["parts"].items())]
    if not parts:
        return None
    column = entry["partition_column"]
    select = ", ".join(f"{sql_identifier(name)}::{kind} as {sql_identifier(name)}" for name, kind in entry["columns"])
    listed = ", ".join(sql_literal(store.url(part["file"], absolute=True)) for part in parts)
    schema = ""
    if all(part.get("field_ids") for part in parts):
        fields = ", ".join(
            f"{i}: {{name: {sql_literal(name)}, type: {sql_literal(kind)}, default_value: null}}"
            for i, (name, kind) in _field_ids(entry["columns"], column)
        )
        schema = f", schema = map {{{fields}}}"
    return (
        f"select {select} from read_parquet([{listed}], hive_partitioning = true, "
        f"hive_types = {{'{column}': date}}{schema})"
    )


def _encode(manifest: dict) -> bytes:
    return (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8")


def write_manifest(lake: Lake, manifest: dict, *, expected: str | None) -> str:
    """`_manifest.json`, replaced only if it is still the version read (expected: its token, None when there
    was none): renamed into place in a folder, a conditional put on S3 (If-Match / If-None-Match). A direct
    reader sees the previous publish's files or these. Raises LakeConflict, naming the object, when another
    publisher replaced it since. Returns where it went."""
    store = open_store(lake)
    store.replace(MANIFEST, _encode(manifest), expected)
    return store.url(MANIFEST)


def check_unchanged(lake: Lake, expected: str | None) -> None:
    """Fail early, before the published file is replaced, when another publisher replaced the manifest since
    it was read (write_manifest's conditional put is what decides; this only narrows the window)."""
    store = open_store(lake)
    found = store.read(MANIFEST)
    if (found[1] if found else None) != expected:
        raise LakeConflict(f"{store.url(MANIFEST)}: changed since this publish read it (another publisher wrote it)")


def record_generation(lake: Lake, manifest: dict) -> None:
    """`_manifests/<generation>.json` (a new object: If-None-Match on S3), before the published file is
    renamed into place: a crash before the rename still leaves these files protected from garbage collection
    until a later publish succeeds."""
    open_store(lake).create(f"{MANIFESTS}/{manifest['generation']}.json", _encode(manifest))


def abandon_generation(lake: Lake, manifest: dict) -> list[str]:
    """Delete what a publish that lost the race wrote: its `_manifests/<generation>.json` and its own part
    files (named after its generation, so no other manifest names them). Returns the removed keys."""
    store = open_store(lake)
    suffix = f"/part-{manifest['generation']}.parquet"
    own = sorted(f for f in manifest_files(manifest) if f.endswith(suffix))
    record = f"{MANIFESTS}/{manifest['generation']}.json"
    present = set(store.list(f"{MANIFESTS}/"))
    for key in [*own, *([record] if record in present else [])]:
        store.delete(key)
    return own


def collect_garbage(lake: Lake, previous_generation: str | None, purge_days: Iterable[date] = ()) -> list[str]:
    """Delete partition files no reader can need: those named by no manifest of the previous published
    generation or a newer one, and older than that generation (a newer one may be another publisher's upload,
    not recorded yet). A reader holding the previous published file keeps working; one holding an older file
    may not. purge_days (the days whose text retention dropped): their day partitions' files that the manifest in
    force does not name go too, the previous generation's included, so a dropped text leaves the lake the night it
    is dropped (a reader still holding the previous published file may then lose those days). Returns the removed
    files (relative to the lake)."""
    store = open_store(lake)
    history = [k for k in store.list(f"{MANIFESTS}/") if k.count("/") == 1 and k.endswith(".json")]
    keep_from = previous_generation or ""
    keep: set[str] = set()
    for key in history:
        if _stem(key) >= keep_from and (found := store.read(key)) is not None:
            keep |= manifest_files(json.loads(found[0].decode("utf-8")))
    purge = {f"day={d.isoformat()}" for d in purge_days}
    current = read_manifest(store) if purge else {"generation": None, "tables": {}}
    in_force, newest = manifest_files(current), current["generation"] or ""
    removed = []
    for spec in LAKE_TABLES:
        for key in store.list(f"{spec.name}/"):
            # a newer generation's file no manifest names yet: another publisher's upload in flight
            unneeded = key not in keep and (not keep_from or _generation_of(key) < keep_from)
            superseded = key.split("/")[1] in purge and key not in in_force and _generation_of(key) < newest
            if unneeded or superseded:
                store.delete(key)
                removed.append(key)
    for key in history:
        if _stem(key) < keep_from:
            store.delete(key)
    store.tidy(spec.name for spec in LAKE_TABLES)
    return removed


def _generation_of(key: str) -> str:
    """The generation in a part file's name (part-<generation>.parquet); "" for any other name."""
    name = key.rsplit("/", 1)[-1]
    return (
        name.removeprefix("part-").removesuffix(".parquet")
        if name.startswith("part-") and name.endswith(".parquet")
        else ""
    )


def _stem(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(".json")
