"""The DuckDB warehouse: short-lived connections, transactions, schema creation and migration (SQL: lib/core/sql.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import duckdb

from citegate_assets.lib.core.sql import SQL_DIR, load_sql, run_script
from citegate_assets.lib.core.sql import query as query  # importers of the warehouse keep working
from citegate_assets.lib.core.sql import split_statements as split_statements
from citegate_assets.lib.core.sql import sql_identifier as sql_identifier
from citegate_assets.lib.core.sql import sql_literal as sql_literal

# Bounded memory for a nightly run on a laptop; DuckDB spills beyond it. MEMORY_LIMIT_ENV sizes it for a pod.
DEFAULT_SETTINGS: dict[str, str | bool] = {"memory_limit": "4GB", "preserve_insertion_order": False}
MEMORY_LIMIT_ENV = "CITEGATE_DUCKDB_MEMORY_LIMIT"


def connection_settings() -> dict[str, str | bool]:
    """DEFAULT_SETTINGS, with memory_limit from CITEGATE_DUCKDB_MEMORY_LIMIT when set (e.g. "2GB", "1500MiB")."""
    settings = dict(DEFAULT_SETTINGS)
    limit = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if limit:
        settings["memory_limit"] = _checked_limit(limit)
    return settings


@cache
def _checked_limit(limit: str) -> str:
    try:
        duckdb.connect(":memory:", config={"memory_limit": limit}).close()
    except duckdb.Error as exc:
        raise ValueError(
            f"{MEMORY_LIMIT_ENV}={limit!r}: not a memory size DuckDB reads (e.g. 2GB, 1500MiB): {exc}"
        ) from None
    return limit


class WarehouseLockedError(RuntimeError):
    pass


@contextmanager
def connect(path: str | os.PathLike, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection that is closed even when the body raises (the file lock goes with it)."""
    path = str(path)
    created = False
    if not read_only and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        created = not Path(path).exists()
    try:
        con = duckdb.connect(path, read_only=read_only, config=dict(connection_settings()))
        if created:
            os.chmod(path, 0o600)  # prompts hold user data: the owner only
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise WarehouseLockedError(
                f"{path}: the warehouse is open in another process (another `citegate run`, or an analyst "
                f"session on the working file; analysts should open the published copy). Detail: {exc}"
            ) from None
        raise
    try:
        if read_only and path != ":memory:":
            from citegate_assets.lib.storage.lake_store import register_for_views

            register_for_views(con)  # views over a lake on S3 read through s3fs (docs/object-storage.md)
        yield con
    finally:
        con.close()


SCHEMA_VERSION = 18  # sql/schema.sql is this version; sql/migrations/NNN_*.sql takes version NNN-1 to NNN


class SchemaError(RuntimeError):
    pass


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create the tables, or upgrade a warehouse written by an earlier release, one migration at a time."""
    version = schema_version(con)
    if version is not None and version > SCHEMA_VERSION:
        raise SchemaError(
            f"the warehouse is at schema version {version}, newer than this citegate's {SCHEMA_VERSION}: "
            "upgrade citegate"
        )
    if version != SCHEMA_VERSION:
        _migrate(con, version)
    from citegate_assets.lib.storage.text_store import ensure_prompts_view  # imports this module

    ensure_prompts_view(con)


def _migrate(con: duckdb.DuckDBPyConnection, version: int | None) -> None:
    with transaction(con):
        for number in range((version or SCHEMA_VERSION) + 1, SCHEMA_VERSION + 1):
            run_script(con, f"migrations/{_migration(number)}")
        con.execute(load_sql("schema"))
        con.execute(
            "create table if not exists schema_version (version integer not null, applied_at timestamptz not null)"
        )
        con.execute("insert into schema_version values ($v, now())", {"v": SCHEMA_VERSION})


def schema_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """None for an empty database; 1 for a warehouse written before versions were recorded."""
    tables = {
        t
        for (t,) in con.sql(
            "select table_name from duckdb_tables() where database_name = current_database()"
        ).fetchall()
    }
    if "schema_version" in tables:
        [(version,)] = con.sql("select max(version) from schema_version").fetchall()
        return version
    return 1 if "ingested_files" in tables else None  # the ledger: every release had it


@cache
def _migration(number: int) -> str:
    found = sorted(p.stem for p in (SQL_DIR / "migrations").glob(f"{number:03d}_*.sql"))
    if len(found) != 1:
        raise SchemaError(f"sql/migrations/: expected one {number:03d}_*.sql, found {found}")
    return found[0]


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Commit when the body ends, roll back when it (or the commit) raises; the first error is the one raised."""
    con.execute("begin transaction")
    try:
        yield con
        con.execute("commit")
    except BaseException:
        try:
            con.execute("rollback")
        except duckdb.Error:
            pass  # a failed commit has already ended the transaction
        raise


def append_frame(con: duckdb.DuckDBPyConnection, table: str, frame) -> None:
    """Append a polars frame to a table by column name (table names are code constants)."""
    name = f"new_{table}"
    con.register(name, frame.to_arrow())
    try:
        con.execute(f"insert into {table} by name select * from {name}")
    finally:
        con.unregister(name)
