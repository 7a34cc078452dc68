"""The nightly job publishes a small DuckDB file over the lake's Delta tables: every table reads the same rows as
the working warehouse, a re-run day is replaced rather than added, and the lake goes where the settings say."""

from datetime import date

import polars as pl
import pytest
from deltalake import DeltaTable

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage.publish import PUBLISHED_AS
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import copy_run, run_once

START, END = date(2026, 11, 2), date(2026, 11, 5)


@pytest.fixture
def nightly(tmp_path, dagster_home, monkeypatch):
    landing = tmp_path / "landing"
    generate_logs(landing, days=4, requests_per_day=10, seed=4, malformed=True)
    warehouse = tmp_path / "w.duckdb"
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    monkeypatch.delenv("CITEGATE_LAKE", raising=False)

    def run(start: date = START, end: date = END):
        result = run_range(RunPlan(start, end), landing=landing, warehouse=warehouse, config_file=None)
        assert result.success
        return result

    return run, warehouse


@pytest.fixture(scope="module")
def first_night(tmp_path_factory):
    """The nightly fixture's first run, made once: (its folder, its result). Read by one test, copied by another."""
    root = tmp_path_factory.mktemp("publish-first-night")
    generate_logs(root / "landing", days=4, requests_per_day=10, seed=4, malformed=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("CITEGATE_LAKE", raising=False)
        result = run_once(root, RunPlan(START, END))
    return root, result


def published_metadata(result) -> dict:
    [event] = [
        e.materialization
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "published_warehouse"
    ]
    return {k: v.value for k, v in event.metadata.items()}


def differences(warehouse, published) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Per table of the working file: (rows only in it, rows only in the published file), equal tables
    omitted; and the tables compared."""
    with connect(warehouse, read_only=True) as con:
        con.execute(f"attach '{published}' as pub (read_only)")
        [(db,)] = con.sql("select current_database()").fetchall()
        tables = [  # the published name of each table: prompt_rows is published as `prompts` (lib/storage/publish.py)
            PUBLISHED_AS.get(f"main.{t}", f"main.{t}").removeprefix("main.")
            for (t,) in con.sql(
                "select table_name from duckdb_tables() where database_name = $db and schema_name = 'main'",
                params={"db": db},
            ).fetchall()
        ]
        out = {}
        for t in tables:
            [(only_working,)] = con.sql(
                f'select count(*) from (from "{db}".main.{t} except all from pub.main.{t})'
            ).fetchall()
            [(only_published,)] = con.sql(
                f'select count(*) from (from pub.main.{t} except all from "{db}".main.{t})'
            ).fetchall()
            if only_working or only_published:
                out[t] = (only_working, only_published)
        return out, tables


def test_every_table_of_the_published_file_reads_the_working_rows(first_night):
    root, result = first_night
    warehouse = root / "w.duckdb"
    published = warehouse.with_name("w.published.duckdb")
    lake = warehouse.with_name("w.lake")  # the default: beside the warehouse, named after it

    diff, tables = differences(warehouse, published)
    assert diff == {}
    assert {"prompts", "citations", "provenance_results", "metric_lineage", "citation_queue"} <= set(tables)
    with connect(published, read_only=True) as con:
        views = {v for (v,) in con.sql("select view_name from duckdb_views() where not internal").fetchall()}
        [(prompts,)] = con.sql("select count(*) from prompts").fetchall()
    assert {"prompts", "prompt_sections", "retrievals", "citations", "provenance_results"} <= views
    with connect(warehouse, read_only=True) as con:
        assert con.sql("select count(*) from prompts").fetchall() == [(prompts,)] and prompts >= 40
    assert published.stat().st_size < warehouse.stat().st_size  # the large tables are not copied
    meta = published_metadata(result)
    assert meta["lake"] == str(lake)
    days = [d.isoformat() for d in (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 4), date(2026, 11, 5))]
    assert meta["partitions_written"]["prompts"] == days
    assert meta["partitions_written"]["metric_lineage"] == ["2026-11-02"]


def test_a_rerun_day_is_replaced_not_added(first_night, nightly, tmp_path):
    run, warehouse = nightly
    copy_run(first_night[0], tmp_path)  # the first run's files: the working file, the lake, the published copy
    published = warehouse.with_name("w.published.duckdb")
    lake = warehouse.with_name("w.lake")
    with connect(published, read_only=True) as con:
        before = con.sql("select day, count(*) from citations group by day order by day").fetchall()

    result = run(date(2026, 11, 3), date(2026, 11, 3))

    written = published_metadata(result)["partitions_written"]
    assert written["provenance_results"] == ["2026-11-03"]  # the run's day only, whatever the history
    assert written["prompts"] == ["2026-11-03"]
    with connect(published, read_only=True) as con:
        assert con.sql("select day, count(*) from citations group by day order by day").fetchall() == before
    assert differences(warehouse, published)[0] == {}
    files = DeltaTable(lake / "citations").file_uris()
    assert len(files) == 4  # one file per day in force
    assert sorted(lake_module.current_files(lake, "citations")) == sorted(files)
    with connect(warehouse, read_only=True) as con:
        working = con.sql("select day, count(*) from citations group by all order by 1").fetchall()
    frame = pl.scan_delta(str(lake / "citations")).group_by("day").len().sort("day").collect()
    assert list(frame.iter_rows()) == working


def test_the_lake_goes_where_citegate_lake_says(nightly, tmp_path, monkeypatch):
    run, warehouse = nightly
    monkeypatch.setenv("CITEGATE_LAKE", str(tmp_path / "elsewhere" / "lake"))
    result = run(date(2026, 11, 2), date(2026, 11, 2))
    assert published_metadata(result)["lake"] == str(tmp_path / "elsewhere" / "lake")
    assert (tmp_path / "elsewhere" / "lake" / "prompts" / "day=2026-11-02").is_dir()
    assert not warehouse.with_name("w.lake").exists()
