"""Weekly metrics recompute only the weeks whose inputs changed, and the result equals a full
recompute: a multi-week history gated by the real nightly job, then a late record landing in an old day, a
review decision on an old week, and a change to an old week that no run day points at."""

import shutil
from datetime import date, datetime, timezone

import pytest

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.metrics.preregistered import compute_metrics, load_definitions, update_metrics
from citegate_assets.lib.review.reviews import append_review, make_review
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import copy_run, run_once

WEEK1, WEEK2, WEEK3 = date(2026, 11, 2), date(2026, 11, 9), date(2026, 11, 16)
METRIC_TABLES = ("weekly_surface_metrics", "weekly_breakdowns", "metric_lineage")


def _rounded(row: tuple) -> tuple:
    # sums of fractional weights may add in another order: equal to 12 decimals is equal
    return tuple(round(v, 12) if isinstance(v, float) else v for v in row)


def snapshot(con) -> dict[str, list[tuple]]:
    out = {}
    for table in METRIC_TABLES:
        columns = "* exclude (computed_at)" if table != "metric_lineage" else "*"
        rows = [_rounded(r) for r in con.sql(f"select {columns} from {table}").fetchall()]
        out[table] = sorted(rows, key=repr)
    return out


def full_recompute(warehouse, tmp_path) -> dict[str, list[tuple]]:
    """The same warehouse with every week recomputed from scratch (on a copy)."""
    copy = tmp_path / "full-copy.duckdb"
    copy.unlink(missing_ok=True)
    shutil.copy(warehouse, copy)
    with connect(copy) as con:
        con.execute("begin transaction")
        compute_metrics(con, load_definitions(), datetime(2030, 1, 1, tzinfo=timezone.utc))
        con.execute("commit")
        return snapshot(con)


def computed_at_by_week(warehouse) -> dict[date, datetime]:
    with connect(warehouse, read_only=True) as con:
        return dict(con.sql("select week_start, max(computed_at) from weekly_surface_metrics group by 1").fetchall())


def recomputed(before: dict, after: dict) -> set[date]:
    return {week for week in after if before.get(week) != after[week]}


@pytest.fixture(scope="module")
def first_history(tmp_path_factory):
    """The first run over the 15 days, made once for the module; each test goes on from a copy of its files."""
    root = tmp_path_factory.mktemp("incremental-history")
    generate_logs(root / "landing", days=15, requests_per_day=12, seed=5, malformed=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CITEGATE_REVIEWER", "tester")
        run_once(root, RunPlan(WEEK1, date(2026, 11, 16)))
    return root


@pytest.fixture
def history(first_history, tmp_path, dagster_home, monkeypatch):
    copy_run(first_history, tmp_path)
    landing = tmp_path / "landing"
    warehouse = tmp_path / "w.duckdb"
    reviews = tmp_path / "reviews"
    monkeypatch.setenv("CITEGATE_REVIEWS", str(reviews))
    monkeypatch.setenv("CITEGATE_REVIEWER", "tester")

    def run(start: date, end: date) -> None:
        result = run_range(RunPlan(start, end), landing=landing, warehouse=warehouse, config_file=None)
        assert result.success

    return run, landing, warehouse, reviews


def test_only_changed_weeks_are_recomputed_and_equal_a_full_recompute(history, tmp_path):
    run, landing, warehouse, reviews = history
    start = computed_at_by_week(warehouse)
    assert set(start) == {WEEK1, WEEK2, WEEK3}
    with connect(warehouse, read_only=True) as con:
        assert snapshot(con) == full_recompute(warehouse, tmp_path)

    # a late file lands with records of 2026-11-04 (week 1); that day is run again
    late = tmp_path / "late"
    generate_logs(late, days=1, requests_per_day=4, seed=9, start_date="2026-11-04", malformed=False)
    text = (late / "2026-11-04.jsonl").read_text(encoding="utf-8").replace("req-20261104-", "late-20261104-")
    (landing / "late-2026-11-04.jsonl").write_text(text, encoding="utf-8")
    with connect(warehouse, read_only=True) as con:
        [(before,)] = con.sql("select count(*) from citations where day = '2026-11-04'").fetchall()
    run(date(2026, 11, 4), date(2026, 11, 4))
    after_late = computed_at_by_week(warehouse)
    assert recomputed(start, after_late) == {WEEK1}
    with connect(warehouse, read_only=True) as con:
        [(grown,)] = con.sql("select count(*) from citations where day = '2026-11-04'").fetchall()
        assert grown > before
        assert con.sql("select count(*) from metric_lineage where request_id like 'late-%'").fetchall()[0][0] > 0
        assert snapshot(con) == full_recompute(warehouse, tmp_path)

    # a reviewer decides an entry of week 1 while the nightly run gates week 3's day only
    with connect(warehouse, read_only=True) as con:
        cid, reason, claim, passage = con.sql(
            "select citation_id, reason, claim, passage from citation_queue "
            "where day < $d order by citation_id limit 1",
            params={"d": WEEK2},
        ).fetchall()[0]
    append_review(
        reviews, make_review(citation_id=cid, outcome="repair", queue_reason=reason, claim=claim, passage=passage)
    )
    run(WEEK3, WEEK3)
    after_review = computed_at_by_week(warehouse)
    assert recomputed(after_late, after_review) == {WEEK1, WEEK3}
    with connect(warehouse, read_only=True) as con:
        [(weight,)] = con.sql(
            "select numerator_weight from metric_lineage where metric = 'queue_repair_rate' and citation_id = $c",
            params={"c": cid},
        ).fetchall()
        assert weight == 1.0
        assert snapshot(con) == full_recompute(warehouse, tmp_path)

    # nothing changed: a re-run of week 3's day recomputes week 3 alone
    run(WEEK3, WEEK3)
    assert recomputed(after_review, computed_at_by_week(warehouse)) == {WEEK3}


def test_a_change_no_run_day_points_at_is_found_by_its_fingerprint(history, tmp_path):
    _run, _landing, warehouse, _reviews = history
    definitions = load_definitions()
    now = datetime(2031, 1, 1, tzinfo=timezone.utc)
    with connect(warehouse) as con:
        con.execute("begin transaction")
        assert update_metrics(con, definitions, now) == []  # nothing changed since the run
        # a verdict of week 2 is dropped and one of week 1 flips, outside any run
        con.execute(
            "delete from support_verdicts where citation_id = "
            "(select min(citation_id) from support_verdicts where day >= $a and day < $b)",
            {"a": WEEK2, "b": WEEK3},
        )
        con.execute(
            "update support_verdicts set verdict = 'no', support_pass = false, judged_at = $now where citation_id = "
            "(select min(citation_id) from support_verdicts where day < $b and verdict = 'yes')",
            {"b": WEEK2, "now": now},
        )
        assert update_metrics(con, definitions, now) == [WEEK1, WEEK2]
        con.execute("commit")
        con.execute("checkpoint")  # the copy full_recompute makes holds what is committed
        assert snapshot(con) == full_recompute(warehouse, tmp_path)
        # a new definition version would change every week: all are recomputed
        con.execute("begin transaction")
        con.execute("update metric_week_inputs set definitions_sha256 = 'older'")
        assert update_metrics(con, definitions, now) == [WEEK1, WEEK2, WEEK3]
        con.execute("commit")
        con.execute("checkpoint")  # the copy full_recompute makes holds what is committed
        assert snapshot(con) == full_recompute(warehouse, tmp_path)
