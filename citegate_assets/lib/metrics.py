"""Preregistered metric definitions (README "Weekly metrics"; SPEC section 9): SQL files with a header, pinned by a
lock file.

Each definition is one query returning its *membership*: one row per citation in the denominator
(week_start, surface, breakdown, citation_id, request_id, numerator_weight). The numbers are sums
over it, and `citegate trace` reads the same rows back, so a metric cell and its lineage cannot drift.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from .warehouse import SQL_DIR, load_sql, run_script

METRICS_DIR = SQL_DIR / "metrics"
LOCK_FILE = METRICS_DIR / "metrics.lock.json"
HEADER_KEYS = ("name", "version", "kind", "description", "numerator", "denominator")
KINDS = ("rate", "breakdown", "count")
HEADLINE = ("provenance_pass_rate", "support_pass_rate", "end_to_end_pass_rate", "queue_repair_rate")


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
    """Rebuild metric_lineage, weekly_surface_metrics and weekly_breakdowns (in the caller's transaction)."""
    run_script(con, "metric_tables/clear")
    for d in definitions:
        con.execute(
            "insert into metric_lineage select $metric, $version, week_start, surface, breakdown, citation_id, "
            f"request_id, numerator_weight from ({d.sql})",
            {"metric": d.name, "version": d.version},
        )
    con.execute(load_sql("metric_tables/aggregate_headline"), {"now": now})
    con.execute(load_sql("metric_tables/aggregate_breakdowns"), {"now": now})
