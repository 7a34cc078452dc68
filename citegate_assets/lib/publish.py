"""Publish a read-only snapshot of the working DuckDB file for analysts (notes §3.2).

DuckDB allows many read-only processes *or* one writer on a file, never both: an analyst who opens the
working file, even read-only, blocks the nightly run. So the pipeline copies the working file into a fresh
file and renames it over the published path. On POSIX an analyst connection that is already open keeps
reading the old snapshot (it holds the old inode); new connections open the new one.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from citegate_assets.lib.warehouse import connect

# Tables in the database the connection opened, excluding temporary and internal ones.
_TABLES_SQL = """
select schema_name, table_name
from duckdb_tables()
where database_name = current_database() and not temporary and not internal
order by schema_name, table_name
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
            expected = _row_counts(con)
            alias = "pub" if source_db != "pub" else "pub_copy"
            # ATTACH inherits the read-only mode of the source connection unless told otherwise.
            con.execute(f"attach {_literal(tmp)} as {alias} (read_write)")
            try:
                con.execute(f"copy from database {_identifier(source_db)} to {alias}")
                con.execute(f"checkpoint {alias}")
            finally:
                con.execute(f"detach {alias}")
        with connect(tmp, read_only=True) as con:
            copied = _row_counts(con)
        _check_counts(expected, copied)
        os.chmod(tmp, 0o600)
        _fsync(tmp)
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise
    _fsync_dir(target.parent)
    return {"tables": len(expected), "bytes": target.stat().st_size, "path": str(target)}


def _row_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    counts = {}
    for schema, table in con.sql(_TABLES_SQL).fetchall():
        name = f"{_identifier(schema)}.{_identifier(table)}"
        counts[f"{schema}.{table}"] = con.sql(f"select count(*) from {name}").fetchall()[0][0]
    return counts


def _check_counts(expected: dict[str, int], copied: dict[str, int]) -> None:
    for table, rows in expected.items():
        if table not in copied:
            raise RuntimeError(f"publish: table {table} is missing from the copy")
        if copied[table] != rows:
            raise RuntimeError(f"publish: table {table} has {copied[table]} rows in the copy, {rows} in the source")
    extra = sorted(set(copied) - set(expected))
    if extra:
        raise RuntimeError(f"publish: the copy has tables the source does not: {', '.join(extra)}")


def _literal(path: Path) -> str:
    """A SQL string literal (DuckDB literals have no backslash escapes; only ' needs doubling)."""
    return "'" + str(path).replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove `<target>.tmp-<pid>` copies (and their .wal) of publishes whose process is gone."""
    removed = []
    for tmp in Path(target).parent.glob(f"{Path(target).name}.tmp-*"):
        pid = tmp.name.rsplit(".tmp-", 1)[1].removesuffix(".wal")
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


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable; best effort (not every platform lets a directory be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
