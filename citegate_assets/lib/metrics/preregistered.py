"""Preregistered metric definitions (docs/metrics.md; SPEC section 9): SQL files with a header, pinned by a
lock file.

Each definition is one query returning its *membership*: one row per citation in the denominator
(week_start, surface, breakdown, citation_id, request_id, numerator_weight). The numbers are sums
over it, and `citegate trace` reads the same rows back, so a metric cell and its lineage cannot drift.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

import duckdb

from citegate_assets.lib.storage.warehouse import SQL_DIR, load_sql, query, run_script, sql_identifier

METRICS_DIR = SQL_DIR / "metrics"
LOCK_FILE = METRICS_DIR / "metrics.lock.json"
HEADER_KEYS = ("name", "version", "kind", "description", "numerator", "denominator")
KINDS = ("rate", "breakdown", "count")
HEADLINE = (
    "provenance_pass_rate",
    "support_pass_rate",
    "end_to_end_pass_rate",
    "queue_repair_rate",
    "support_unjudged_rate",  # what no judge decided, counted apart from support_pass_rate
)


class DefinitionError(ValueError):
    pass


@dataclass(frozen=True)
class MetricDefinition:
    name: str
    version: int
    kind: str  # rate: one value per (week, surface); breakdown: a rate per (week, surface, breakdown); count
    description: str
    numerator: str
    denominator: str
    sql: str
    sha256: str
    path: str


def text_sha256(text: str) -> str:
    return hashlib.sha256((text.rstrip() + "\n").encode("utf-8")).hexdigest()


def parse_definition(path: Path) -> MetricDefinition:
    text = path.read_text(encoding="utf-8")
    header: dict[str, str] = {}
    body_lines: list[str] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if line.startswith("-- ") and ":" in line and not body_lines:
            key, _, value = line[3:].partition(":")
            key = key.strip()
            if key not in HEADER_KEYS:
                raise DefinitionError(
                    f"{path.name}:{line_no}: unknown header key '{key}' (expected {', '.join(HEADER_KEYS)})"
                )
            header[key] = value.strip()
        else:
            body_lines.append(line)
    missing = [k for k in HEADER_KEYS if not header.get(k)]
    if missing:
        raise DefinitionError(
            f"{path.name}: header is missing '{missing[0]}' (every definition states {', '.join(HEADER_KEYS)})"
        )
    if header["name"] != path.stem:
        raise DefinitionError(f"{path.name}: header name '{header['name']}' differs from the file name")
    if header["kind"] not in KINDS:
        raise DefinitionError(f"{path.name}: kind '{header['kind']}' is not one of {', '.join(KINDS)}")
    try:
        version = int(header["version"])
    except ValueError:
        raise DefinitionError(f"{path.name}: version '{header['version']}' is not an integer") from None
    return MetricDefinition(
        name=header["name"],
        version=version,
        kind=header["kind"],
        description=header["description"],
        numerator=header["numerator"],
        denominator=header["denominator"],
        sql="\n".join(body_lines).strip(),
        sha256=text_sha256(text),
        path=str(path),
    )


def load_definitions(folder: Path | None = None) -> list[MetricDefinition]:
    return [parse_definition(p) for p in sorted((folder or METRICS_DIR).glob("*.sql"))]


def read_lock(path: Path | None = None) -> dict[str, dict[str, str]]:
    path = path or LOCK_FILE
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def lock_problems(definitions: list[MetricDefinition], lock: dict) -> list[str]:
    """Why the definitions in force differ from what was preregistered; empty when they match."""
    problems = []
    for d in definitions:
        pinned = lock.get(d.name, {}).get(str(d.version))
        if pinned is None:
            problems.append(
                f"{d.name} v{d.version}: not in the lock file; preregister it with `citegate metrics --lock`"
            )
        elif pinned != d.sha256:
            problems.append(
                f"{d.name} v{d.version}: definition text changed without a version bump "
                f"(locked {pinned[:12]}, now {d.sha256[:12]}); bump '-- version:' and run `citegate metrics --lock`"
            )
    return problems


def update_lock(definitions: list[MetricDefinition], path: Path | None = None) -> list[str]:
    """Pin new (name, version) pairs; refuse to re-pin a changed text under a version already locked."""
    path = path or LOCK_FILE
    lock = read_lock(path)
    changed = [p for p in lock_problems(definitions, lock) if "without a version bump" in p]
    if changed:
        raise DefinitionError("; ".join(changed))
    added = []
    for d in definitions:
        versions = lock.setdefault(d.name, {})
        if str(d.version) not in versions:
            versions[str(d.version)] = d.sha256
            added.append(f"{d.name} v{d.version}")
    path.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return added


def compute_metrics(con: duckdb.DuckDBPyConnection, definitions: list[MetricDefinition], now: datetime) -> None:
    """Rebuild metric_lineage, weekly_surface_metrics and weekly_breakdowns over every week (in the caller's
    transaction). It also forgets what each week was computed from, so the next update_metrics() recomputes
    every week once and records it."""
    run_script(con, "metric_tables/clear")
    _compute(con, definitions, now, "metric_lineage")


def update_metrics(
    con: duckdb.DuckDBPyConnection,
    definitions: list[MetricDefinition],
    now: datetime,
    days: Iterable[date] = (),
) -> list[date]:
    """Recompute only the weeks whose inputs changed (in the caller's transaction); return them.

    A week is recomputed when its input fingerprint (sql/metric_tables/week_inputs.sql: row counts, latest
    writes and review decisions of its days) or the definitions in force differ from what it was last
    computed from, when it holds one of `days` (the run's days: a re-run day counts even if it looks the
    same), or when its inputs are gone. The result equals compute_metrics() because every definition's
    membership for a week reads only rows of that week's days (tests/test_incremental_metrics.py)."""
    current = _current_week_inputs(con)
    digest = definitions_sha256(definitions)
    stored = {
        week: (fingerprint, sha) for week, fingerprint, sha in query(con, "metric_tables/stored_week_inputs").fetchall()
    }
    touched = {week for week, fingerprint in current.items() if stored.get(week) != (fingerprint, digest)}
    touched |= {week_start(d) for d in days}
    touched |= {week for (week,) in query(con, "metric_tables/result_weeks").fetchall() if week not in current}
    weeks = sorted(touched)
    if not weeks:
        return []
    _set_touched_weeks(con, weeks)
    run_script(con, "metric_tables/clear_weeks")
    [(database,)] = con.sql("select current_database()").fetchall()
    shadowed = [t for (t,) in query(con, "metric_tables/day_tables").fetchall()]
    try:
        # Each day table (and the lineage) is read through a temp view holding only the touched weeks: temp
        # views come first in DuckDB's search path, so the locked definition files run unchanged.
        for table in shadowed:
            con.execute(f"create or replace temp view {table} as {_weeks_filter(database, table, 'day', weeks)}")
        con.execute(
            "create or replace temp view metric_lineage as "
            + _weeks_filter(database, "metric_lineage", "week_start", weeks)
        )
        _compute(con, definitions, now, f"{sql_identifier(database)}.main.metric_lineage")
    finally:
        for table in [*shadowed, "metric_lineage"]:
            con.execute(f"drop view if exists temp.main.{table}")
    run_script(con, "metric_tables/record_week_inputs", {"definitions_sha256": digest, "now": now})
    return weeks


def week_start(day: date) -> date:
    """The Monday of the ISO week holding day (date_trunc('week', day) in DuckDB)."""
    return day - timedelta(days=day.weekday())


def definitions_sha256(definitions: list[MetricDefinition]) -> str:
    text = "\n".join(f"{d.name}:{d.version}:{d.sha256}" for d in sorted(definitions, key=lambda d: (d.name, d.version)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _compute(con: duckdb.DuckDBPyConnection, definitions: list[MetricDefinition], now: datetime, lineage: str) -> None:
    for d in definitions:
        con.execute(
            f"insert into {lineage} select $metric, $version, week_start, surface, breakdown, citation_id, "
            f"request_id, numerator_weight from ({d.sql})",
            {"metric": d.name, "version": d.version},
        )
    con.execute(load_sql("metric_tables/aggregate_headline"), {"now": now})
    con.execute(load_sql("metric_tables/aggregate_breakdowns"), {"now": now})


def _current_week_inputs(con: duckdb.DuckDBPyConnection) -> dict[date, str]:
    """Week -> input fingerprint, also left in the temp table current_week_inputs for record_week_inputs."""
    con.execute("create or replace temp table current_week_inputs as " + load_sql("metric_tables/week_inputs"))
    return dict(con.sql("select week_start, fingerprint from current_week_inputs").fetchall())


def _set_touched_weeks(con: duckdb.DuckDBPyConnection, weeks: list[date]) -> None:
    con.execute(
        "create or replace temp table touched_weeks as select unnest($weeks::date[]) as week_start", {"weeks": weeks}
    )


def _weeks_filter(database: str, table: str, column: str, weeks: list[date]) -> str:
    """The rows of the touched weeks. The bounds are dates this module formats (a view takes no parameters);
    the range lets DuckDB skip row groups, the semi-join drops the untouched weeks inside it."""
    low, high = weeks[0], weeks[-1] + timedelta(days=7)
    return (
        f"select * from {sql_identifier(database)}.main.{table} "
        f"where {column} >= date '{low.isoformat()}' and {column} < date '{high.isoformat()}' "
        f"and date_trunc('week', {column})::date in (select week_start from temp.main.touched_weeks)"
    )
