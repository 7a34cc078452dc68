"""What the review pages read: the published copy (a read-only connection per call, never held) and the live
reviews log. SQL lives in sql/web/ (and the CLI's sql/review/, sql/report/, sql/metric_tables/ where it fits)."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from citegate_assets.lib.calibration.label_log import LabelLine, read_label_log
from citegate_assets.lib.calibration.label_log import log_stamp as labels_stamp
from citegate_assets.lib.calibration.own_labels import Sample, draw_sample
from citegate_assets.lib.reporting import gate_summary
from citegate_assets.lib.review.reviews import (
    LogLine,
    Review,
    format_timestamp,
    latest_by_citation,
    log_stamp,
    read_reviews,
)
from citegate_assets.lib.storage.warehouse import connect, query

STATUSES = ("open", "decided", "accepted", "repaired", "escalated")
FILTERS = ("surface", "reason", "status", "week", "owner")
PAGE_SIZE = 50


class NotPublished(FileNotFoundError):
    """No published copy yet: the pages never fall back to the working file."""


@dataclass(frozen=True)
class Filters:
    surface: str | None = None
    reason: str | None = None
    status: str | None = None
    week: date | None = None  # the Monday of an ISO week
    owner: str | None = None

    @classmethod
    def parse(cls, params: Any) -> Filters:
        """From query parameters; an empty value is no filter. A bad status or week raises ValueError."""
        values = {name: (params.get(name) or "").strip() or None for name in FILTERS}
        if values["status"] is not None and values["status"] not in STATUSES:
            raise ValueError(f"unknown status {values['status']!r} (expected one of: {', '.join(STATUSES)})")
        week = None
        if values["week"] is not None:
            try:
                day = date.fromisoformat(values["week"])
            except ValueError:
                raise ValueError(f"week {values['week']!r} is not a date (YYYY-MM-DD)") from None
            week = day - timedelta(days=day.weekday())
        return cls(values["surface"], values["reason"], values["status"], week, values["owner"])

    def sql(self) -> dict[str, Any]:
        return {
            "surface": self.surface,
            "reason": self.reason,
            "status": self.status,
            "owner": self.owner,
            "week": None if self.week is None else self.week.isoformat(),
        }

    def query_items(self) -> list[tuple[str, str]]:
        """The filters in force as query-string pairs (to carry across links)."""
        return [(name, str(value)) for name, value in self.sql().items() if value is not None]


@dataclass(frozen=True)
class Key:
    """A queue entry's place in the queue's order (reason, day, citation_id): the paging key."""

    reason: str
    day: str
    citation_id: str

    def encode(self) -> list[tuple[str, str]]:
        return [("k_reason", self.reason), ("k_day", self.day), ("k_id", self.citation_id)]

    @classmethod
    def parse(cls, params: Any) -> Key | None:
        reason, day, cid = params.get("k_reason"), params.get("k_day"), params.get("k_id")
        if reason is None or day is None or cid is None:
            return None
        try:
            date.fromisoformat(day)
        except ValueError:
            raise ValueError(f"paging key day {day!r} is not a date") from None
        return cls(reason, day, cid)


class Warehouse:
    """The published copy, opened read-only for each call and closed at once (a run may replace it any time)."""

    def __init__(self, published: Path) -> None:
        self.published = published

    @contextmanager
    def open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        if not self.published.exists():
            raise NotPublished(
                f"{self.published}: no published copy yet. The review page reads only the published copy, never the "
                "working file a run may be writing: run `citegate run` first (its last step publishes the copy)"
            )
        with connect(self.published, read_only=True) as con:
            yield con

    def stamp(self) -> tuple[int, int] | None:
        """(mtime_ns, size) of the published copy: what a cache keyed on it must match."""
        try:
            stat = self.published.stat()
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size


def dicts(rel: duckdb.DuckDBPyRelation) -> list[dict[str, Any]]:
    return [dict(zip(rel.columns, row)) for row in rel.fetchall()]


def queue_page(
    con: duckdb.DuckDBPyConnection, filters: Filters, after: Key | None, before: Key | None, limit: int
) -> tuple[list[dict], bool, bool]:
    """(rows, has_previous, has_next) for one page: after a key, before a key, or from the start."""
    params = filters.sql()
    if before is not None:
        rel = query(
            con,
            "web/queue_page_before",
            {
                **params,
                "before_reason": before.reason,
                "before_day": before.day,
                "before_id": before.citation_id,
                "limit": limit + 1,
            },
        )
        rows = dicts(rel)
        has_previous = len(rows) > limit
        rows = list(reversed(rows[:limit]))
        has_next = True  # the key we came back from follows this page
        return rows, has_previous, has_next
    keyset = (
        {"after_reason": None, "after_day": None, "after_id": None}
        if after is None
        else {"after_reason": after.reason, "after_day": after.day, "after_id": after.citation_id}
    )
    rows = dicts(query(con, "web/queue_page", {**params, **keyset, "limit": limit + 1}))
    has_next = len(rows) > limit
    return rows[:limit], after is not None, has_next


def key_of(row: dict) -> Key:
    day = row["day"]
    return Key(row["reason"], day.isoformat() if isinstance(day, date) else str(day), row["citation_id"])


def neighbours(con: duckdb.DuckDBPyConnection, filters: Filters, citation_id: str) -> tuple[str | None, str | None]:
    """(previous, next) citation ids around an entry in the filtered queue's order."""
    found = query(con, "web/queue_key", {"citation_id": citation_id}).fetchall()
    if not found:
        return None, None
    key = Key(*found[0])
    before, _, _ = queue_page(con, filters, None, key, 1)
    after, _, _ = queue_page(con, filters, key, None, 1)
    return (before[0]["citation_id"] if before else None), (after[0]["citation_id"] if after else None)


def choices(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {name: [] for name in ("surface", "reason", "owner", "week")}
    for name, value in query(con, "web/queue_choices").fetchall():
        out[name].append(value)
    return out


def published_timestamp(value: datetime | None) -> str | None:
    """A published reviewed_at in the reviews log's own format, so the two compare as strings."""
    return None if value is None else format_timestamp(value)


class LiveLog:
    """The live reviews log, re-read only when one of its files changed (size or mtime)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._stamp: tuple | None = None
        self._lines: list[LogLine] = []
        self._latest: dict[str, Review] = {}

    def _refresh(self) -> None:
        stamp = log_stamp(self.folder)
        with self._lock:
            if stamp != self._stamp:
                self._lines = read_reviews(self.folder)
                self._latest = latest_by_citation(self._lines)
                self._stamp = stamp

    def latest(self) -> dict[str, Review]:
        self._refresh()
        return self._latest

    def history(self, citation_id: str) -> list[Review]:
        self._refresh()
        return [line.review for line in self._lines if line.review and line.review.citation_id == citation_id]


def pending(latest: dict[str, Review], row: dict) -> Review | None:
    """The live log's latest decision on a queue row when the published copy does not hold it yet."""
    review = latest.get(row["citation_id"])
    if review is None:
        return None
    applied = published_timestamp(row.get("reviewed_at"))
    return review if applied is None or review.reviewed_at > applied else None


class ChartCache:
    """The weekly rates chart as PNG bytes, drawn once per published copy (drawing takes about a second)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._png = b""

    def png(self, warehouse: Warehouse) -> bytes:
        stamp = warehouse.stamp()
        with self._lock:
            if stamp is not None and stamp == self._stamp:
                return self._png
            import matplotlib.pyplot as plt

            from citegate_assets.lib.metrics.chart import DPI, PNG_METADATA, rates_figure

            with warehouse.open() as con:
                frame = query(con, "metric_tables/headline_for_chart").pl()
            fig = rates_figure(frame)
            try:
                buffer = io.BytesIO()
                fig.savefig(buffer, format="png", dpi=DPI, metadata=PNG_METADATA)
            finally:
                plt.close(fig)
            self._stamp, self._png = stamp, buffer.getvalue()
            return self._png


class SampleCache:
    """The own-label samples (lib/calibration/own_labels.py) drawn from the published copy, kept until the copy changes:
    the same
    (copy, seed, size) is the same sample."""

    KEEP = 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[tuple, Sample] = {}

    def sample(self, warehouse: Warehouse, seed: int, size: int) -> Sample:
        key = (warehouse.stamp(), seed, size)
        with self._lock:
            found = self._samples.get(key)
            if found is not None:
                return found
            with warehouse.open() as con:
                drawn = draw_sample(con, seed, size)
            self._samples = {k: v for k, v in self._samples.items() if k[0] == key[0]}
            while len(self._samples) >= self.KEEP:
                self._samples.pop(next(iter(self._samples)))
            self._samples[key] = drawn
            return drawn


class LiveLabels:
    """The labels folder's own-label lines, re-read only when one of its JSONL files changed (size or mtime)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = threading.Lock()
        self._stamp: tuple | None = None
        self._lines: list[LabelLine] = []

    def lines(self) -> list[LabelLine]:
        stamp = labels_stamp(self.folder)
        with self._lock:
            if stamp != self._stamp:
                self._lines = read_label_log(self.folder)
                self._stamp = stamp
            return self._lines


class GateLineCache:
    """The support gate's one line (lib/reporting.py gate_summary) of the published copy, read once per copy."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._line: str | None = None

    def line(self, warehouse: Warehouse) -> str | None:
        stamp = warehouse.stamp()
        if stamp is None:
            return None
        with self._lock:
            if stamp != self._stamp:
                try:
                    with warehouse.open() as con:
                        self._line = gate_summary(dicts(query(con, "support/gate_status_rows")))
                except (NotPublished, duckdb.Error):  # gone meanwhile, or a copy from before schema 14
                    self._line = None
                self._stamp = stamp
            return self._line
