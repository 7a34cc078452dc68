"""Each surface a step meets, resolved to its policy once, in Python: SQL joins this complete table and never
falls back to [surfaces.default] itself (the rule lives in Config.surface, nowhere else)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date

import duckdb
import polars as pl

from citegate_assets.lib.core.surfaces import SurfacePolicies
from citegate_assets.lib.storage.warehouse import query

POLICY_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "surface": pl.String,
    "stakes": pl.String,
    "sample_rate": pl.Float64,
    "template": pl.String,
    "owner": pl.String,
}


def policies_frame(config: SurfacePolicies, surfaces: Iterable[str]) -> pl.DataFrame:
    """One row per surface: its own policy if citegate.toml lists it, else the default policy under its name."""
    rows = []
    for surface in sorted(set(surfaces)):
        policy = config.surface(surface)
        rows.append((surface, policy.stakes, float(policy.sample_rate), policy.template, policy.owner))
    return pl.DataFrame(rows, schema=POLICY_SCHEMA, orient="row")


@contextmanager
def registered_policies(
    con: duckdb.DuckDBPyConnection, config: SurfacePolicies, start: date, end: date
) -> Iterator[pl.DataFrame]:
    """The relation `surface_policies` on con: every surface gated in [start, end) with its policy."""
    surfaces = [s for (s,) in query(con, "provenance/surfaces", {"start": start, "end": end}).fetchall()]
    frame = policies_frame(config, surfaces)
    con.register("surface_policies", frame.to_arrow())
    try:
        yield frame
    finally:
        con.unregister("surface_policies")
