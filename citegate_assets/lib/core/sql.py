"""SQL from sql/: load a statement file, split a script, run or query it with bound parameters, quote the rest."""

from __future__ import annotations

import os
from functools import cache

import duckdb

from citegate_assets.lib.core.paths import sql_dir

SQL_DIR = sql_dir()  # package data: the project's sql/ in a checkout, a copy inside a wheel


@cache
def load_sql(name: str) -> str:
    """Text of sql/<name>.sql; table names come from these files, values are always bound."""
    return (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8")


def run_script(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> None:
    """Run each statement of sql/<name>.sql, binding the named parameters it uses."""
    params = params or {}
    for statement in _statements(name):
        used = {k: v for k, v in params.items() if f"${k}" in statement}
        con.execute(statement, used) if used else con.execute(statement)


@cache
def _statements(name: str) -> tuple[str, ...]:
    return split_statements(load_sql(name))


def split_statements(sql: str) -> tuple[str, ...]:
    """The statements of a script: split at `;` outside quotes, `--` comments dropped (a `;` in one is prose)."""
    statements, current, i, quote = [], [], 0, ""
    while i < len(sql):
        ch = sql[i]
        if quote:
            current.append(ch)
            quote = "" if ch == quote else quote  # a doubled quote closes and reopens: the same text
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif sql.startswith("--", i):
            i = sql.find("\n", i)
            if i < 0:
                break
            continue
        elif ch == ";":
            statements.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    statements.append("".join(current).strip())
    return tuple(s for s in statements if s)


def query(con: duckdb.DuckDBPyConnection, name: str, params: dict | None = None) -> duckdb.DuckDBPyRelation:
    """A relation over sql/<name>.sql (one statement), binding the named parameters it uses."""
    text = load_sql(name)
    used = {k: v for k, v in (params or {}).items() if f"${k}" in text}
    return con.sql(text, params=used) if used else con.sql(text)


def sql_literal(value: str | os.PathLike) -> str:
    """A SQL string literal, for what cannot be a bound parameter (a view's file list, ATTACH's path).
    DuckDB literals have no backslash escapes: only ' needs doubling."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    """A quoted SQL identifier (a table or column name from code or a catalog, never from a log)."""
    return '"' + name.replace('"', '""') + '"'
