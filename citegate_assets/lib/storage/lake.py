"""The lake: the large per-day tables as Delta Lake tables beside the warehouse (docs/scaling.md).

    <lake>/<table>/_delta_log/…                                   the table's versions (delta-rs writes it)
    <lake>/<table>/day=YYYY-MM-DD/part-…-c000.zstd.parquet       its data files (metric_lineage: week_start=…)

One Delta table per lake table, partitioned by its day (or week) column, written and committed by delta-rs
(`deltalake`) from the working warehouse at publish time. A partition that changed is replaced by an atomic
overwrite whose predicate names exactly its days, so a reader of any version sees each day whole, old or new, and
two writers commit through delta-rs's conflict checks (a local folder, or S3 with conditional puts). The published
DuckDB file names the plain Parquet files of one pinned version of each table (lib/storage/publish.py). No deletion
vectors, no column mapping (the files of a version stay plain Parquet, their columns named as in the warehouse),
and no column statistics in the log: a text column's min/max would copy the start of a prompt into a file that
forget and retention cannot rewrite. Each citegate commit records in its commit info the warehouse's columns and
every partition's stamp (what it was written from), so the next publish reads the log, not the files, to decide.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypeAlias
from urllib.parse import unquote

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]

from citegate_assets.lib.storage.lake_store import LakeStore, StoredFile, open_store
from citegate_assets.lib.storage.text_store import streamed_text
from citegate_assets.lib.storage.warehouse import sql_identifier, sql_literal

# the log records no column statistics (numRecords only), and a reader replays at most 10 commits after a checkpoint
DELTA_CONFIGURATION = {"delta.dataSkippingNumIndexedCols": "0", "delta.checkpointInterval": "10"}
# a commit replaces at most this many days: delta-rs holds an open file per partition until the commit
DAYS_PER_COMMIT = 7
# zstd level 3 instead of delta-rs's default: prompt files 22 % smaller in the same time (level 6: 16 % more, 65 %
# slower)
ZSTD_LEVEL = 3
# rows per Arrow batch handed to delta-rs: prompts are tens of kilobytes each
BATCH_ROWS = 2048
# a table whose commit lost to another writer's on the same days is planned again from the new version
COMMIT_ATTEMPTS = 5
# how many commits back the latest citegate commit (its columns and stamps) is looked for: first a few, then more
RECENT_COMMITS = 3
HISTORY_LOOKBACK = 30
# a data file no version names, younger than this, may be another writer's upload before its commit
ORPHAN_AGE = timedelta(hours=24)
METADATA_KEY = "citegate"
FORMAT = 2  # 1 was the lake's own manifest (_manifest.json), before Delta tables

# what a lake written by a citegate before Delta tables holds besides the tables' folders
LEGACY_MANIFEST = "_manifest.json"
LEGACY_MANIFESTS = "_manifests/"
_LEGACY_PART = re.compile(r"^part-\d{8}T\d{12}Z-\d+\.parquet(\.tmp)?$")
UPGRADE_HINT = "`citegate run` (any command that publishes) converts it to Delta tables in place"


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
    # the count(<text column>) terms: retention and forget null text in place (lib/retention/drop_text.py)
    # read from prompt_rows: the view would read every prompt's text to count it (schema 12, lib/storage/text_store.py)
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
_SPECS = {t.name: t for t in LAKE_TABLES}


class LakeError(RuntimeError):
    pass


class LakeConflict(LakeError):
    """Other writers kept committing the same days of a table: this publish gave up, nothing of it is published."""


# a lake root: a folder, an s3:// URI, or a store opened from one
Lake: TypeAlias = LakeStore | str | os.PathLike


@dataclass(frozen=True)
class Part:
    rows: int | None  # the log's numRecords summed over the partition's files (None: a file without it)
    files: dict[str, StoredFile]  # key (relative to the lake) -> size and time the log records


@dataclass(frozen=True)
class PinnedTable:
    """One version of a lake table, as the published file names it."""

    name: str
    uri: str  # the Delta table's root
    version: int
    partition_column: str
    columns: list[list[str]]  # the warehouse's [name, type], in its order
    parts: dict[str, Part]

    @property
    def rows(self) -> int | None:
        counts = [part.rows for part in self.parts.values()]
        return None if any(n is None for n in counts) else sum(n for n in counts if n is not None)

    def file_uris(self, store: LakeStore) -> dict[str, StoredFile]:
        return {store.uri(key): f for _, part in sorted(self.parts.items()) for key, f in sorted(part.files.items())}


@dataclass
class Export:
    tables: dict[str, PinnedTable] = field(default_factory=dict)
    written: dict[str, list[str]] = field(default_factory=dict)  # table -> partitions rewritten
    handles: dict[str, Any] = field(default_factory=dict)  # table -> its loaded DeltaTable, for collect_garbage


def table_uri(lake: Lake, table: str) -> str:
    return open_store(lake).uri(table)


def is_legacy(lake: Lake) -> bool:
    """A lake a citegate before Delta tables wrote (its own manifest), not yet converted."""
    store = open_store(lake)
    return store.exists(LEGACY_MANIFEST) or bool(store.files(LEGACY_MANIFESTS))


def refuse_legacy(lake: Lake) -> None:
    store = open_store(lake)
    if is_legacy(store):
        raise LakeError(f"{store.root}: written by an earlier citegate (its own {LEGACY_MANIFEST}); {UPGRADE_HINT}")


def current_files(lake: Lake, table: str) -> list[str]:
    """The data files of a table's latest version (paths, or s3:// URLs): what `pl.scan_delta` reads."""
    store = open_store(lake)
    refuse_legacy(store)
    found = _open(store, table)
    if found is None:
        raise LakeError(f"{store.uri(table)}: no Delta table (publish first)")
    return list(_pin_state(store, _SPECS[table], found, []).file_uris(store))


# -- writing ----------------------------------------------------------------------------------------------------


def export_changed(con: duckdb.DuckDBPyConnection, lake: Lake, *, force_days: Iterable[date] = ()) -> Export:
    """Write every partition that differs from the lake's latest version, table by table; pin each table's version.

    A partition differs when it is new, its row count (the log's numRecords) or its stamp (the latest citegate
    commit's) differs from the warehouse's, the table's columns changed (a migration: every partition is rewritten),
    one of its files is missing or not the size the log records, or its day is in force_days (the run's days: a
    re-run day is rewritten even when nothing about it looks different). Partitions gone from the warehouse are
    removed. Each table's partitions are replaced by overwrites whose predicate names their days (DAYS_PER_COMMIT
    at a time); a commit that loses to another writer's on the same days is planned again. Then every partition of
    the pinned version is checked against the warehouse's row count. Nothing is deleted here.
    """
    store = open_store(lake)
    forced = {d.isoformat() for d in force_days}
    store.prepare()
    export = Export()
    con.execute("set arrow_large_buffer_size = true")  # a batch of prompts may exceed 2 GiB of text
    try:
        for spec in LAKE_TABLES:
            columns = _columns(con, spec.name)
            if not columns:
                raise LakeError(f"the warehouse has no table {spec.name}")
            fingerprints = _fingerprints(con, spec)
            table, written = _write_table(con, store, spec, columns, fingerprints, forced)
            export.tables[spec.name] = _pin(store, spec, table, columns, fingerprints)
            export.written[spec.name] = written
            export.handles[spec.name] = table
    finally:
        con.execute("reset arrow_large_buffer_size")
    return export


def _write_table(
    con: duckdb.DuckDBPyConnection,
    store: LakeStore,
    spec: LakeTable,
    columns: list[list[str]],
    fingerprints: dict[str, tuple[int, str | None]],
    forced: set[str],
) -> tuple[Any, list[str]]:
    """(the table as loaded after this writer's commits, the partitions written)."""
    from deltalake.exceptions import CommitFailedError

    written: list[str] = []
    failure: Exception | None = None
    for attempt in range(COMMIT_ATTEMPTS):
        table = _open(store, spec.name)
        recorded = _recorded(table) if table is not None else None
        same_columns = recorded is not None and recorded.get("columns") == columns
        stamps: dict[str, str | None] = dict(recorded.get("stamps", {})) if same_columns and recorded else {}
        parts = _parts(store, spec, table) if table is not None else {}
        present = store.files(f"{spec.name}/") if table is not None else {}
        changed = [
            part
            for part, (rows, stamp) in sorted(fingerprints.items())
            if not same_columns
            or part not in parts
            or parts[part].rows != rows
            or part not in stamps
            or stamps[part] != stamp
            or any(present.get(key) is None or present[key].size != f.size for key, f in parts[part].files.items())
            or (spec.column == "day" and part in forced)
        ]
        gone = sorted(set(parts) - set(fingerprints))
        if table is not None and same_columns and not changed and not gone:
            return table, sorted(written)
        kept = {part: stamps[part] for part in fingerprints if part not in changed and part in stamps}
        done: list[str] = []
        try:
            table = _replace(
                con, store, spec, table, columns, fingerprints, changed, gone, kept, done, new_schema=not same_columns
            )
        except CommitFailedError as exc:
            failure = exc
            time.sleep(0.05 * (attempt + 1))
            continue
        finally:
            written += [part for part in done if part not in written]
        return table, sorted(written)
    raise LakeConflict(
        f"{store.uri(spec.name)}: {COMMIT_ATTEMPTS} commits lost to other writers of the same days ({failure})"
    )


def _replace(
    con: duckdb.DuckDBPyConnection,
    store: LakeStore,
    spec: LakeTable,
    table: Any,
    columns: list[list[str]],
    fingerprints: dict[str, tuple[int, str | None]],
    changed: list[str],
    gone: list[str],
    stamps: dict[str, str | None],
    done: list[str],
    *,
    new_schema: bool,
) -> Any:
    """The changed partitions written and the gone ones removed, a group of days per commit; each commit's info
    records the stamps of the partitions in force after it (a crash between commits leaves the rest to rewrite).
    table: as loaded when planned (None: a new table), so delta-rs checks each commit against that version; the
    table after the last commit is returned."""
    from deltalake import CommitProperties, WriterProperties, write_deltalake

    groups = [changed[i : i + DAYS_PER_COMMIT] for i in range(0, len(changed), DAYS_PER_COMMIT)] or [[]]
    for i, group in enumerate(groups):
        days = group + (gone if i == 0 else [])
        stamps = {**stamps, **{part: fingerprints[part][1] for part in group}}
        info = {"format": FORMAT, "columns": columns, "stamps": stamps}
        with streamed_text(con) if spec.name == "prompts" else nullcontext(), store.writing():
            write_deltalake(
                table if table is not None else store.uri(spec.name),
                _rows(con, spec, group),
                partition_by=[spec.column],
                mode="overwrite",
                # no days (a new or emptied table): the whole table is replaced
                predicate=_predicate(spec.column, days) if days else None,
                schema_mode="overwrite" if new_schema else None,
                configuration=DELTA_CONFIGURATION,
                storage_options=store.storage_options(),
                writer_properties=WriterProperties(compression="ZSTD", compression_level=ZSTD_LEVEL),
                commit_properties=CommitProperties(custom_metadata={METADATA_KEY: info}),
            )
        done += group
        if table is None:
            table = _open(store, spec.name)
    return table


def _predicate(column: str, days: list[str]) -> str:
    listed = ", ".join(sql_literal(date.fromisoformat(day).isoformat()) for day in days)
    return f"{column} IN ({listed})"


def _rows(con: duckdb.DuckDBPyConnection, spec: LakeTable, parts: list[str]) -> Any:
    """The partitions' rows as one Arrow stream, a partition after another, BATCH_ROWS at a time (the prompts' text
    streamed from its files: text_store.py streamed_text, which the caller holds)."""
    source = "prompts_between($part, $part + 1)" if spec.name == "prompts" else spec.name
    where = "" if spec.name == "prompts" else f" where {spec.column} = $part"
    sql = f"select * from {source}{where}"
    first = date(1, 1, 1)
    schema = con.sql(sql + " limit 0", params={"part": first}).to_arrow_reader().schema

    def batches() -> Iterator[Any]:
        for part in parts:
            yield from con.sql(sql, params={"part": date.fromisoformat(part)}).to_arrow_reader(BATCH_ROWS)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[list[str]]:
    rows = con.execute(
        "select column_name, data_type from duckdb_columns() "
        "where database_name = current_database() and schema_name = 'main' and table_name = $t "
        "order by column_index",
        {"t": table},
    ).fetchall()
    return [[name, kind] for name, kind in rows]


def _fingerprints(con: duckdb.DuckDBPyConnection, spec: LakeTable) -> dict[str, tuple[int, str | None]]:
    """partition -> (rows, stamp); reads only the partition and stamp columns."""
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
    return {part.isoformat(): (n, s) for part, n, s in con.sql(sql).fetchall()}


# -- reading the log --------------------------------------------------------------------------------------------


def _open(store: LakeStore, table: str, version: int | None = None) -> Any:
    """The Delta table (at a version), None when there is none yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(store.uri(table), version=version, storage_options=store.storage_options())
    except TableNotFoundError:
        return None


def _recorded(table: Any) -> dict | None:
    """The columns and stamps the latest citegate commit recorded; None when none is in reach. It is the latest
    commit, or the one before a vacuum's two, almost always: a few commits are read first, one GET each."""
    for limit in (RECENT_COMMITS, HISTORY_LOOKBACK):
        for commit in table.history(limit):
            info = commit.get(METADATA_KEY)
            if isinstance(info, str):
                try:
                    info = json.loads(info)
                except json.JSONDecodeError:
                    continue
            if isinstance(info, dict) and info.get("format") == FORMAT:
                return info
    return None


def _parts(store: LakeStore, spec: LakeTable, table: Any) -> dict[str, Part]:
    """The table version's partitions: rows and files from its add actions."""
    found: dict[str, tuple[list[int | None], dict[str, StoredFile]]] = {}
    for action in pa.table(table.get_add_actions(flatten=True)).to_pylist():
        value = action.get(f"partition.{spec.column}")
        part = value.isoformat() if isinstance(value, date) else str(value)
        rows, files = found.setdefault(part, ([], {}))
        rows.append(action.get("num_records"))
        modified = datetime.fromtimestamp(action["modification_time"] / 1000, UTC)
        files[f"{spec.name}/{unquote(action['path'])}"] = StoredFile(action["size_bytes"], modified)
    return {
        part: Part(None if any(n is None for n in rows) else sum(n for n in rows if n is not None), files)
        for part, (rows, files) in found.items()
    }


def _pin_state(store: LakeStore, spec: LakeTable, table: Any, columns: list[list[str]]) -> PinnedTable:
    return PinnedTable(
        spec.name, store.uri(spec.name), table.version(), spec.column, columns, _parts(store, spec, table)
    )


def _pin(
    store: LakeStore,
    spec: LakeTable,
    table: Any,
    columns: list[list[str]],
    fingerprints: dict[str, tuple[int, str | None]],
) -> PinnedTable:
    """The table's version this writer left (its own last commit, or the one it found in force), every partition's
    rows checked against the warehouse's."""
    if table is None:
        raise LakeError(f"{store.uri(spec.name)}: no Delta table after writing it")
    pinned = _pin_state(store, spec, table, columns)
    held = {part: p.rows for part, p in pinned.parts.items()}
    wanted = {part: rows for part, (rows, _) in fingerprints.items()}
    if held != wanted:
        wrong = sorted(part for part in set(held) | set(wanted) if held.get(part) != wanted.get(part))
        first = wrong[0]
        raise LakeError(
            f"{pinned.uri} version {pinned.version}: {spec.column}={first} holds {held.get(first)} rows, the "
            f"warehouse {wanted.get(first)} ({len(wrong)} partitions differ)"
        )
    return pinned


# -- the published file's views ---------------------------------------------------------------------------------


def view_sql(store: Lake, table: PinnedTable) -> str | None:
    """The select a published view runs: exactly the pinned version's files (absolute paths or s3:// URLs), columns
    in the warehouse's order and types. None when the version has no file (the caller creates an empty table).
    The `schema` map names each file column and its type, so creating the view opens no file; the partition column
    comes from the paths (hive partitioning)."""
    store = open_store(store)
    files = table.file_uris(store)
    if not files:
        return None
    column = table.partition_column
    select = ", ".join(f"{sql_identifier(name)}::{kind} as {sql_identifier(name)}" for name, kind in table.columns)
    listed = ", ".join(sql_literal(uri) for uri in files)
    fields = ", ".join(
        f"{sql_literal(name)}: {{name: {sql_literal(name)}, type: {sql_literal(kind)}, default_value: null}}"
        for name, kind in table.columns
        if name != column
    )
    return (
        f"select {select} from read_parquet([{listed}], hive_partitioning = true, "
        f"hive_types = {{'{column}': date}}, schema = map {{{fields}}})"
    )


# -- what no reader needs any more ------------------------------------------------------------------------------


def collect_garbage(
    lake: Lake,
    keep_from: dict[str, int],
    *,
    purge_days: Iterable[date] = (),
    purge_all: bool = False,
    now: datetime | None = None,
    handles: dict[str, Any] | None = None,
) -> list[str]:
    """Delete the data files no reader of a published file can need; return them (keys relative to the lake).

    keep_from: per table, the version the published file before this publish named: every version from it to the
    latest is kept (a reader holding that file keeps working), the files older versions alone named go (delta-rs's
    vacuum with those versions kept), and so do files no version names that are older than ORPHAN_AGE (a crashed
    writer's; a younger one may be another writer's upload before its commit). A table missing from keep_from is
    left as it is. purge_days: the days whose text retention dropped; in their partitions, every file the latest
    version does not name goes at once, the kept versions' and the young ones' included. purge_all: the same for
    every partition (forget: the earlier versions may hold the text). Only under the exclusive run lock may a purge
    run: a writer's upload before its commit would go too. handles: tables already loaded (brought up to date here).
    """
    store = open_store(lake)
    now = now or datetime.now(UTC)
    purge = {f"{spec.column}={d.isoformat()}" for d in purge_days for spec in LAKE_TABLES if spec.column == "day"}
    removed: list[str] = []
    for spec in LAKE_TABLES:
        table = (handles or {}).get(spec.name)
        if table is not None:
            table.update_incremental()
        else:
            table = _open(store, spec.name)
        if table is None:
            continue
        latest = table.version()
        current = {key for part in _parts(store, spec, table).values() for key in part.files}
        listed = {k: f for k, f in store.files(f"{spec.name}/").items() if not _is_log(spec.name, k)}
        if spec.name in keep_from and set(listed) - current:
            first = min(keep_from[spec.name], latest)
            with store.writing():
                vacuumed = table.vacuum(
                    retention_hours=0,
                    enforce_retention_duration=False,
                    dry_run=False,
                    keep_versions=list(range(first, latest + 1)),
                )
            gone = {f"{spec.name}/{unquote(path)}" for path in vacuumed}
            removed += sorted(gone)
            listed = {k: f for k, f in listed.items() if k not in gone}
            old = {k for k, f in listed.items() if k not in current and f.modified < now - ORPHAN_AGE}
            if old:
                kept = _files_of_versions(store, spec, first, latest)
                for key in sorted(old - kept):
                    store.delete(key)
                    removed.append(key)
                    listed.pop(key)
        for key in sorted(listed):
            in_purge = purge_all or key.split("/")[1] in purge
            if key not in current and in_purge:
                store.delete(key)
                removed.append(key)
    store.tidy(f"{spec.name}/" for spec in LAKE_TABLES)
    return removed


def _is_log(table: str, key: str) -> bool:
    return key.startswith(f"{table}/_delta_log/")


def _files_of_versions(store: LakeStore, spec: LakeTable, first: int, last: int) -> set[str]:
    kept: set[str] = set()
    for version in range(first, last + 1):
        table = _open(store, spec.name, version)
        if table is not None:
            kept |= {key for part in _parts(store, spec, table).values() for key in part.files}
    return kept


# -- a lake an earlier citegate wrote ---------------------------------------------------------------------------


def legacy_files(lake: Lake) -> list[str]:
    """What a lake of the earlier format holds: its day files (part-<generation>.parquet), its manifests, their
    temporaries; `_manifest.json` last (its presence is what says the lake is not converted yet)."""
    store = open_store(lake)
    found = [
        key
        for spec in LAKE_TABLES
        for key in sorted(store.files(f"{spec.name}/"))
        if not _is_log(spec.name, key) and _LEGACY_PART.match(key.rsplit("/", 1)[-1])
    ]
    found += sorted(store.files(LEGACY_MANIFESTS))
    found += sorted(k for k in store.files("") if "/" not in k and k.startswith(f"{LEGACY_MANIFEST}.tmp-"))
    if store.exists(LEGACY_MANIFEST):
        found.append(LEGACY_MANIFEST)
    return found


def remove_legacy(lake: Lake, files: list[str]) -> None:
    """Delete the earlier format's files (legacy_files()), the manifest last: a crash on the way leaves the lake
    still marked for conversion, and the next publish finishes it."""
    store = open_store(lake)
    for key in files:
        store.delete(key)
    store.tidy([*(f"{spec.name}/" for spec in LAKE_TABLES), LEGACY_MANIFESTS])


def pinned_rows(table: PinnedTable) -> int | None:
    """A pinned version's rows, from the log's numRecords (None: a file without it)."""
    return table.rows


def versions_of(tables: dict[str, PinnedTable]) -> dict[str, int]:
    return {name: table.version for name, table in tables.items()}
