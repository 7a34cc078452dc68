"""Publish a read-only snapshot of the working DuckDB file for analysts (notes §3.2).

DuckDB allows many read-only processes *or* one writer on a file, never both: an analyst who opens the
working file, even read-only, blocks the nightly run. So the pipeline builds a fresh file and renames it over
the published path. On POSIX an analyst connection that is already open keeps reading the old snapshot (it
holds the old inode); new connections open the new one.

publish_lake() (the nightly job): the large per-day tables become views over the Parquet files of one version of
each of the lake's Delta tables (lib/storage/lake.py), written only for the days that changed, and the small tables are
copied, so publishing costs seconds whatever the history. The lake may be on S3-compatible storage
(lib/storage/lake_store.py): the published file stays local and its views name s3:// URLs. publish_copy() copies every
table (the whole file).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import date
from pathlib import Path

import duckdb

from citegate_assets.lib.core.durable import fsync_dir, fsync_file
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage import lake_store
from citegate_assets.lib.storage.warehouse import connect, query, sql_identifier, sql_literal

# Tables in the database the connection opened, excluding temporary and internal ones.
_TABLES_SQL = """
select schema_name, table_name
from duckdb_tables()
where database_name = current_database() and not temporary and not internal
"""
# A working table published under the name readers know it by: prompt_rows is `prompts` (a view over it and the
# prompt text files, lib/storage/text_store.py), with the same rows.
PUBLISHED_AS = {"main.prompt_rows": "main.prompts"}
_VIEWS_SQL = """
select schema_name, view_name
from duckdb_views()
where database_name = current_database() and not temporary and not internal
"""


def publish_copy(source: Path, target: Path) -> dict:
    """Copy the DuckDB database `source` to `target` atomically and return {"tables", "bytes", "path"}.

    The caller must not hold a connection to `source` in this process (DuckDB refuses a read-only
    connection next to a read-write one in the same process). `source` is only opened read-only, so
    several publishes or read-only readers of `source` can run at once; a writer on `source` blocks it.
    The copy is written to `<target>.tmp-<pid>`, its row counts are checked table by table against
    `source`, it is made private (0o600: prompts hold user data) and renamed over `target`. On any
    failure the temporary file is removed and `target` is left as it was.
    """
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no DuckDB database to publish")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    remove_stale_temporaries(target)  # a killed run's copy (and its .wal) holds prompts: never leave it behind
    _remove(tmp)  # a leftover from a crashed run with the same pid would be attached, not replaced
    try:
        with connect(source, read_only=True) as con:
            source_db = con.sql("select current_database()").fetchall()[0][0]
            expected = row_counts(con)
            alias = "pub" if source_db != "pub" else "pub_copy"
            # ATTACH inherits the read-only mode of the source connection unless told otherwise.
            con.execute(f"attach {sql_literal(tmp)} as {alias} (read_write)")
            try:
                con.execute(f"copy from database {sql_identifier(source_db)} to {alias}")
                con.execute(f"checkpoint {alias}")
            finally:
                con.execute(f"detach {alias}")
        with connect(tmp, read_only=True) as con:
            copied = row_counts(con)
        check_counts(expected, copied)
        os.chmod(tmp, 0o600)
        fsync_file(tmp)
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise
    fsync_dir(target.parent)
    return {"tables": len(expected), "bytes": target.stat().st_size, "path": str(target)}


def publish_lake(
    source: Path, target: Path, lake: lake_store.LakeStore | str | os.PathLike, *, run_days: Iterable[date] = ()
) -> dict:
    """Publish a small DuckDB file: views over one pinned version of each Delta table of the lake, plus copies of
    the small tables.

    lake: a folder or an s3:// URI (lib/storage/lake_store.py). The partitions that changed since they were last written
    (lib/storage/lake.py: new, different row count or stamp, or one of run_days) are committed to the Delta tables
    first,
    and every partition of each table's new version checked against the warehouse's rows; then the published file
    is built at `<target>.tmp-<pid>` naming exactly the files of those versions (and, in `lake_versions`, which
    versions), its row counts are checked against `source` table by table (a view's from the Delta log:
    _published_counts), and it is renamed over `target`. Then the files no reader can need any more are deleted
    (lake.collect_garbage): every version from the one the replaced published file named is kept, so an analyst
    holding it keeps reading; the superseded files of days whose text retention dropped go at once. A lake an
    earlier citegate wrote (its own manifest) is converted: its tables are written as Delta tables like a first
    publish, and its files removed once the published file naming the Delta files is in place. A crash anywhere
    leaves the previous published file and everything it names readable. Costs the changed partitions plus the
    small tables, whatever the history: the views are bound from the warehouse's columns, no file opened.
    Returns {"tables", "views", "bytes", "path", "written", "removed", "versions", "lake", "upgraded"}.
    """
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no DuckDB database to publish")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    remove_stale_temporaries(target)
    _remove(tmp)
    store = lake_store.open_store(lake)
    try:
        return _publish_lake(source, target, tmp, store, run_days)
    finally:
        store.close()


def _publish_lake(source: Path, target: Path, tmp: Path, store: lake_store.LakeStore, run_days: Iterable[date]) -> dict:
    previous = published_versions(target)
    legacy = lake_module.legacy_files(store) if lake_module.is_legacy(store) else []
    try:
        with connect(source, read_only=True) as con:
            store.register(con)
            export = lake_module.export_changed(con, store, force_days=run_days)
            for pinned in export.tables.values():
                store.lend(pinned.file_uris(store))
            expected = row_counts(con, PUBLISHED_AS)
            retained = [day for (day,) in query(con, "retention/retained_days").fetchall()]
            source_db = con.sql("select current_database()").fetchall()[0][0]
            alias = "pub" if source_db != "pub" else "pub_copy"
            con.execute(f"attach {sql_literal(tmp)} as {alias} (read_write)")
            try:
                _fill_published(con, source_db, alias, store, export.tables, expected)
                con.execute(f"checkpoint {alias}")
            finally:
                con.execute(f"detach {alias}")
        expected[f"main.{LAKE_VERSIONS}"] = len(export.tables)
        with connect(tmp, read_only=True) as con:
            copied = _published_counts(con, export.tables)
        check_counts(expected, copied)
        os.chmod(tmp, 0o600)
        fsync_file(tmp)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        _remove(tmp)
    # a retained day's superseded files hold the text retention dropped: they go now, not a night later
    removed = lake_module.collect_garbage(store, previous, purge_days=retained, handles=export.handles)
    if legacy:
        lake_module.remove_legacy(store, legacy)
    return {
        "tables": len(expected),
        "views": sum(1 for t in export.tables.values() if t.parts),
        "bytes": target.stat().st_size,
        "path": str(target),
        "written": {t: parts for t, parts in export.written.items() if parts},
        "removed": len(removed),
        "versions": lake_module.versions_of(export.tables),
        "lake": store.root,
        "upgraded": len(legacy),
    }


# The published file's table of the Delta table versions its views name: a reader of the lake itself can read the
# same snapshot (`pl.scan_delta(uri, version=…)`), and the next publish keeps every version from these on.
LAKE_VERSIONS = "lake_versions"


def published_versions(target: Path) -> dict[str, int]:
    """table -> the Delta version the published file at `target` names; {} when there is none (or it is a
    published file from before Delta tables)."""
    if not Path(target).is_file():
        return {}
    try:
        con = duckdb.connect(str(target), read_only=True)
    except duckdb.ConnectionException:  # held in this process by a citegate reader, with its settings
        with connect(target, read_only=True) as held:
            return _versions(held)
    except duckdb.Error:
        return {}  # unreadable: this publish keeps every version
    try:
        return _versions(con)
    finally:
        con.close()


def _versions(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    [(found,)] = con.execute(
        "select count(*) from duckdb_tables() where database_name = current_database() and table_name = $t",
        {"t": LAKE_VERSIONS},
    ).fetchall()
    if not found:
        return {}
    return dict(con.sql(f"select table_name, version from {LAKE_VERSIONS}").fetchall())


def _fill_published(
    con: duckdb.DuckDBPyConnection,
    source_db: str,
    alias: str,
    lake: lake_store.LakeStore,
    pinned: dict[str, lake_module.PinnedTable],
    tables: dict[str, int],
) -> None:
    """The lake tables as views over their pinned versions' files, every other table copied, and which versions."""
    for qualified in tables:
        schema, table = qualified.split(".", 1)
        target = f"{alias}.{sql_identifier(schema)}.{sql_identifier(table)}"
        if schema != "main":
            con.execute(f"create schema if not exists {alias}.{sql_identifier(schema)}")
        source = f"{sql_identifier(source_db)}.{sql_identifier(schema)}.{sql_identifier(table)}"
        entry = pinned.get(table) if schema == "main" else None
        select = lake_module.view_sql(lake, entry) if entry is not None else None
        if select is not None:
            con.execute(f"create view {target} as {select}")
        elif entry is not None:  # no partition yet: an empty table of the same columns
            con.execute(f"create table {target} as select * from {source} limit 0")
        else:
            con.execute(f"create table {target} as select * from {source}")
    con.execute(
        f"create table {alias}.main.{LAKE_VERSIONS} "
        "(table_name varchar primary key, uri varchar not null, version bigint not null, partition_column varchar)"
    )
    con.executemany(
        f"insert into {alias}.main.{LAKE_VERSIONS} values (?, ?, ?, ?)",
        [[t.name, t.uri, t.version, t.partition_column] for t in pinned.values()],
    )


def _published_counts(con: duckdb.DuckDBPyConnection, pinned: dict[str, lake_module.PinnedTable]) -> dict[str, int]:
    """Rows per table and view of the published file, a view's without reading the lake: the numRecords the Delta
    log records for the pinned version's files. As strong as counting through the view: the view names exactly
    those files; export_changed checked every partition's count against the warehouse's after writing it, and
    rewrote any whose file is missing or not the size the log records; a data file is never modified (a changed
    partition is a new file). So the sum differs from the working table's count exactly when the view's would,
    e.g. for rows with no day, which no partition holds. A version whose log lacks a count is counted through
    the view."""
    counts = row_counts(con)
    for schema, view in con.sql(_VIEWS_SQL).fetchall():
        entry = pinned.get(view) if schema == "main" else None
        if entry is None:
            raise RuntimeError(f"publish: view {schema}.{view} of the copy is not a lake table")
        rows = lake_module.pinned_rows(entry)
        if rows is None:
            [(rows,)] = con.sql(f"select count(*) from {sql_identifier(schema)}.{sql_identifier(view)}").fetchall()
        counts[f"{schema}.{view}"] = rows
    return counts


def row_counts(con: duckdb.DuckDBPyConnection, published_as: dict[str, str] | None = None) -> dict[str, int]:
    """Rows per table, keyed by schema.table, or by the name published_as gives a table."""
    counts = {}
    for schema, table in con.sql(_TABLES_SQL).fetchall():
        name = f"{sql_identifier(schema)}.{sql_identifier(table)}"
        key = f"{schema}.{table}"
        counts[(published_as or {}).get(key, key)] = con.sql(f"select count(*) from {name}").fetchall()[0][0]
    return counts


def check_counts(expected: dict[str, int], copied: dict[str, int], what: str = "publish") -> None:
    """Every table of the source in the copy with its rows, and no other (what: the copy's purpose, for errors)."""
    for table, rows in expected.items():
        if table not in copied:
            raise RuntimeError(f"{what}: table {table} is missing from the copy")
        if copied[table] != rows:
            raise RuntimeError(f"{what}: table {table} has {copied[table]} rows in the copy, {rows} in the source")
    extra = sorted(set(copied) - set(expected))
    if extra:
        raise RuntimeError(f"{what}: the copy has tables the source does not: {', '.join(extra)}")


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove `<target>.tmp-<pid>` copies (and their .wal, and .prev links) of publishes whose process is gone."""
    removed = []
    for tmp in Path(target).parent.glob(f"{Path(target).name}.tmp-*"):
        pid = tmp.name.rsplit(".tmp-", 1)[1].removesuffix(".wal").removesuffix(".prev")
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(tmp: Path) -> None:
    for path in (tmp, tmp.with_name(tmp.name + ".wal")):
        path.unlink(missing_ok=True)


def missing_lake_folders(published: Path) -> list[str]:
    """The local Delta table folders the published copy's views read that are gone (a warehouse moved or copied
    without its lake); object-store URIs are not checked here. [] for a copy without lake views."""
    with connect(published, read_only=True) as con:
        [(found,)] = con.execute(
            "select count(*) from duckdb_tables() where database_name = current_database() and table_name = $t",
            {"t": LAKE_VERSIONS},
        ).fetchall()
        if not found:
            return []
        uris = [uri for (uri,) in con.sql(f"select uri from {LAKE_VERSIONS} order by table_name").fetchall()]
    return [uri for uri in uris if "://" not in uri and not Path(uri).is_dir()]
