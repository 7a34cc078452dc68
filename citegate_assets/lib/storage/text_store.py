"""The prompt text store (schema 12): each ingest batch's prompt text as Parquet files beside the warehouse.

DuckDB stores multi-kilobyte strings at about 30 MB/s (its checkpoints compress and rewrite them), which made the
DuckDB writer most of ingest's cost; polars writes the same text as Parquet ten times faster. So `prompt_raw` and
`prompt_normalized` of a new prompt go to `<warehouse stem>.text/day=YYYY-MM-DD/<batch>.parquet`, the rest of the
row to the `prompt_rows` table with `text_file` naming its file, and `prompts` is a view joining the two. Readers
name `prompts` as before; rows written before schema 12 (and in-memory warehouses) keep their text inline.

Consistency: a batch's file is fsynced and renamed into place before the transaction that names it commits, and the
view reads a file's row only where `prompt_rows` names that file. So a file no committed row names (a killed
ingest's, a failed batch's, the old version of a file retention or forget rewrote) is never read; `sweep` deletes
such files, and runs only under the warehouse's exclusive run lock (ingest, retention and forget), never while an
ingest writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from citegate_assets.lib.core.durable import private_dir
from citegate_assets.lib.core.sql import load_sql, sql_literal
from citegate_assets.lib.storage.text_files import TEXT_SCHEMA, write_durably

# keeps the view's glob matching something on a warehouse with no text file yet (a day no prompt is on)
EMPTY_FILE = "day=0001-01-01/_empty.parquet"


def text_dir_of(database_path: str | None) -> Path | None:
    """`<warehouse stem>.text/` beside the warehouse file; None for an in-memory database (text stays inline)."""
    if not database_path or database_path == ":memory:":
        return None
    p = Path(database_path).resolve()
    return p.with_name(f"{p.stem}.text")


def text_dir(con: duckdb.DuckDBPyConnection) -> Path | None:
    [(path,)] = con.sql("select path from duckdb_databases() where database_name = current_database()").fetchall()
    return text_dir_of(path)


def view_sql(folder: Path | None) -> str:
    """The `prompts` view's query: prompt_rows with the text of the file each row names (inline text first)."""
    if folder is None:
        return _code(load_sql("text/prompts_inline_view"))
    query = _code(load_sql("text/prompts_view"))
    return query.replace("'$glob'", sql_literal(f"{folder}/day=*/*.parquet")).replace(
        "'$prefix'", sql_literal(f"{folder}/")
    )


def _code(sql: str) -> str:
    """The statement without its comment lines: DuckDB keeps a view's text, and the comments name the placeholders."""
    return " ".join(line for line in sql.splitlines() if not line.lstrip().startswith("--")).strip()


def ensure_prompts_view(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or re-point, after the warehouse moved) the `prompts` view and the text folder it reads. A database
    whose `prompts` is a table (built by hand, not by sql/schema.sql) is left as it is."""
    if con.sql(
        "select 1 from duckdb_tables() where database_name = current_database() and table_name = 'prompts'"
    ).fetchall():
        return
    folder = text_dir(con)
    if folder is not None:
        private_dir(folder)
        empty = folder / EMPTY_FILE
        if not empty.exists():
            write_durably(pl.DataFrame(schema=TEXT_SCHEMA), empty)
    wanted = view_sql(folder)
    found = con.sql(
        "select sql from duckdb_views() where database_name = current_database() and view_name = 'prompts'"
    ).fetchall()
    marker = sql_literal(f"{folder}/day=*/*.parquet") if folder is not None else "from prompt_rows"
    if not found or marker not in found[0][0] or (folder is None and "read_parquet" in found[0][0]):
        con.execute(f"create or replace view prompts as {wanted}")


# DuckDB builds a hash join on the side it estimates smaller, and prompt_rows, the wider row, loses: a reader of the
# `prompts` view would hold every text of its days in memory at once. streamed_text's statements read
# prompts_between() instead, planned with join reordering off (sql/text/prompts_between.sql).
STREAMED_TEXT_OPTIMIZERS = ("join_order", "build_side_probe_side")


def _between_sql(con: duckdb.DuckDBPyConnection) -> str:
    """prompts_between's body: the streaming join where `prompts` is the view over the text files, else (an
    in-memory warehouse, the published copy, whose `prompts` holds or views its text directly) `prompts` itself."""
    folder = text_dir(con)
    joined = con.sql(
        "select 1 from duckdb_tables() where database_name = current_database() and table_name = 'prompt_rows'"
    ).fetchall()
    if folder is None or not joined:
        return "select * from prompts where day >= first_day and day < end_day"
    query = _code(load_sql("text/prompts_between"))
    return query.replace("'$glob'", sql_literal(f"{folder}/day=*/*.parquet")).replace(
        "'$prefix'", sql_literal(f"{folder}/")
    )


@contextmanager
def streamed_text(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """For the statements run inside: `prompts_between(first_day, end_day)`, a temporary macro giving the prompts of
    those days with their text streamed, and DuckDB's join reordering off, so each join is built as written (name
    the prompts first and the smaller inputs after them). The setting is put back on leaving, so a streaming reader
    must be drained or closed inside."""
    con.execute(f"create or replace temp macro prompts_between(first_day, end_day) as table {_between_sql(con)}")
    [(before,)] = con.sql("select current_setting('disabled_optimizers')").fetchall()
    names = [n for n in str(before or "").split(",") if n.strip()]
    wanted = ",".join(dict.fromkeys([*names, *STREAMED_TEXT_OPTIMIZERS]))
    con.execute(f"set disabled_optimizers = {sql_literal(wanted)}")
    restore = f"set disabled_optimizers = {sql_literal(str(before or ''))}"
    try:
        yield
    except BaseException:
        try:
            con.execute(restore)
        except duckdb.Error:  # an aborted transaction takes nothing but a rollback, which is all it can come to
            try:
                con.execute("rollback")  # warehouse.transaction's own rollback then finds none, and lets that pass
                con.execute(restore)
            except duckdb.Error:
                pass
        raise
    con.execute(restore)


def referenced_files(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {name for (name,) in con.sql(load_sql("text/referenced_files")).fetchall()}


def sweep(con: duckdb.DuckDBPyConnection) -> int:
    """Delete the text files no prompt row names (a killed ingest's, a failed batch's, a rewritten file's old
    version) and leftover temporary files; return how many. Only under the exclusive run lock."""
    folder = text_dir(con)
    if folder is None or not folder.is_dir():
        return 0
    keep = referenced_files(con) | {EMPTY_FILE}
    removed = 0
    for day_dir in folder.glob("day=*"):
        for f in day_dir.iterdir():
            if f"{day_dir.name}/{f.name}" not in keep:
                f.unlink(missing_ok=True)
                removed += 1
        try:
            day_dir.rmdir()  # only when empty
        except OSError:
            pass
    return removed


def rewrite_files_in_scope(con: duckdb.DuckDBPyConnection, first, last) -> list[str]:
    """The text-file side of retention and forget, in the caller's transaction and before sql/retention/prompts.sql
    nulls the rows in scope (the temp tables of sql/retention/scope.sql): each file naming a row in scope is
    rewritten with only its rows out of scope, which are re-pointed to the new file. Returns the old files; they
    are never read again and `sweep` removes them once the transaction has committed."""
    folder = text_dir(con)
    if folder is None:
        return []
    params = {"first": first, "last": last}
    files = [name for (name,) in con.execute(load_sql("text/files_in_scope"), params).fetchall()]
    for name in files:
        kept = [rid for (rid,) in con.execute(load_sql("text/rows_kept"), {"file": name, **params}).fetchall()]
        if not kept:
            continue
        survivors = pl.read_parquet(folder / name).filter(pl.col("request_id").is_in(kept))
        new_name = f"{name.split('/', 1)[0]}/{uuid.uuid4().hex}.parquet"
        write_durably(survivors, folder / new_name)
        con.execute(load_sql("text/repoint_file"), {"old": name, "new": new_name, **params})
    return files


def missing_text_folder(warehouse: Path) -> Path | None:
    """The warehouse's text folder when prompt rows name files in it and it is gone (the warehouse was moved or
    copied without it), else None. A warehouse another process holds is not checked here (the run waits or stops)."""
    folder = text_dir_of(str(warehouse))
    if folder is None or folder.is_dir() or not Path(warehouse).is_file():
        return None
    try:
        con = duckdb.connect(str(warehouse), read_only=True)
    except duckdb.Error:
        return None
    try:
        found = con.sql(
            "select 1 from duckdb_tables() where database_name = current_database() and table_name = 'prompt_rows'"
        ).fetchall()
        if not found:
            return None
        named = con.sql("select 1 from prompt_rows where text_file is not null limit 1").fetchall()
    finally:
        con.close()
    return folder if named else None
