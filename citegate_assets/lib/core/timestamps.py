"""The one timestamp type of every table: microseconds in UTC (DuckDB `timestamptz`)."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl

UTC_TIMESTAMP = pl.Datetime("us", "UTC")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)
