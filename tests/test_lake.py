"""The lake (issue 16): the large per-day tables as Hive-layout Parquet day partitions beside the warehouse,
written for exactly the days that changed, atomic per day for every reader (the published DuckDB file,
polars and DuckDB reading the manifest's files), a crash leaving the previous state, a re-run not doubling."""

import json
import os
import stat
import subprocess
import sys
from datetime import date, datetime, timezone
from pathlib import Path

import duckdb
import polars as pl
import pytest

import citegate_assets.lib.publish as publish_module
from citegate_assets.lib import lake as lake_module
from citegate_assets.lib.publish import publish_lake
from citegate_assets.lib.warehouse import connect, ensure_schema

DAYS = (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 10))
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)


def add_citations(con, day: date, n: int, prefix: str = "r") -> None:
    con.execute(
        "insert into citations (citation_id, request_id, day, position, surface, answer_model, chunk_id, span, claim, "
        "span_normalized, claim_normalized, normalization_version, cited_as, location_mismatch) "
        "select $p || '-' || $day || '-' || i || '#0', $p || '-' || $day || '-' || i, $day, 0, "
        "'web', 'model-a', 'k' || i, 'span ' || i, 'claim ''' || i || '''', 'span ' || i, 'claim ' || i, 'n1', "
        "null, null from range($n) t(i)",
        {"p": prefix, "day": day, "n": n},
    )
    con.execute(
        "insert into provenance_results select c.citation_id, c.request_id, c.day, c.surface, c.chunk_id, 'present', "
        "'ok', 0, 4, null, 'n1', $now from citations c where c.day = $day and c.request_id like $p || '-%' ",
        {"day": day, "now": NOW, "p": prefix},
    )


@pytest.fixture
def warehouse(tmp_path):
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        for i, day in enumerate(DAYS):
            add_citations(con, day, 5 + i)
    return path


def paths(tmp_path):
    return tmp_path / "w.published.duckdb", tmp_path / "w.lake"


def read(path: Path, sql: str) -> list[tuple]:
    with connect(path, read_only=True) as con:
        return con.sql(sql).fetchall()


def test_publish_writes_hive_day_partitions_and_a_manifest(warehouse, tmp_path):
    target, lake = paths(tmp_path)

    facts = publish_lake(warehouse, target, lake)

    days = [d.isoformat() for d in DAYS]
    assert facts["written"] == {"citations": days, "provenance_results": days}  # empty tables write nothing
    manifest = json.loads((lake / "_manifest.json").read_text())
    assert manifest["generation"] == facts["generation"]
    parts = manifest["tables"]["citations"]["parts"]
    assert sorted(parts) == [d.isoformat() for d in DAYS]
    for day, part in parts.items():
        file = lake / part["file"]
        assert file.parent == lake / "citations" / f"day={day}"
        assert file.name == f"part-{facts['generation']}.parquet"
        assert stat.S_IMODE(file.stat().st_mode) == 0o600  # prompts hold user data
        # Hive convention: the partition column is in the path only (Spark and Trino refuse it twice)
        assert "day" not in pl.read_parquet_schema(file)
    assert read(target, "select day, count(*) from citations group by day order by day") == [
        (DAYS[0], 5),
        (DAYS[1], 6),
        (DAYS[2], 7),
    ]
    # the published file is views over exactly the manifest's files plus copies of the small tables
    views = {v for (v,) in read(target, "select view_name from duckdb_views() where not internal")}
    assert views == {"citations", "provenance_results"}
    assert read(target, "select count(*) from prompts") == [(0,)]  # empty lake table: same columns, no rows
    assert read(target, "select count(*) from schema_version") == read(warehouse, "select count(*) from schema_version")


def test_direct_readers_polars_and_duckdb_read_the_manifest_files(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    files = lake_module.current_files(lake, "citations")
    expected = sorted(read(warehouse, "select citation_id, day, claim from citations"))

    frame = pl.scan_parquet(files, hive_partitioning=True).select("citation_id", "day", "claim").collect()
    assert sorted(frame.iter_rows()) == expected
    assert frame.schema["day"] == pl.Date

    listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    con = duckdb.connect()
    try:
        rows = con.sql(
            f"select citation_id, day, claim from read_parquet([{listed}], hive_partitioning = true, "
            "hive_types = {'day': date})"
        ).fetchall()
    finally:
        con.close()
    assert sorted(rows) == expected


def test_rerun_day_replaces_it_once_and_old_files_outlive_one_publish(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    first = publish_lake(warehouse, target, lake)
    old_file = (
        lake / json.loads((lake / "_manifest.json").read_text())["tables"]["citations"]["parts"]["2026-11-03"]["file"]
    )
    unchanged = publish_lake(warehouse, target, lake)
    assert unchanged["written"] == {}  # nothing changed: nothing rewritten
    # an analyst holds the current published file open while the day is re-run
    holder = duckdb.connect(str(target), read_only=True)
    try:
        with connect(warehouse) as con:  # the re-run replaces the day's rows (same count, new stamp)
            con.execute("delete from provenance_results where day = $d", {"d": DAYS[1]})
            con.execute("delete from citations where day = $d", {"d": DAYS[1]})
            add_citations(con, DAYS[1], 6)
        rerun = publish_lake(warehouse, target, lake, run_days=[DAYS[1]])
        assert rerun["written"] == {"citations": ["2026-11-03"], "provenance_results": ["2026-11-03"]}
        assert old_file.exists()  # the previous published file still names it
        assert holder.sql("select count(*) from citations").fetchall() == [(18,)]
    finally:
        holder.close()
    assert read(target, "select count(*) from citations where day = '2026-11-03'") == [(6,)]  # not doubled
    assert len(pl.read_parquet(lake_module.current_files(lake, "citations"), hive_partitioning=True)) == 18
    publish_lake(warehouse, target, lake)
    assert not old_file.exists()  # collected once no published file can name it
    day_files = sorted((lake / "citations" / "day=2026-11-03").iterdir())
    assert [f.name for f in day_files] == [f"part-{rerun['generation']}.parquet"]
    assert first["generation"] < rerun["generation"]


def test_late_data_rewrites_only_its_day(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    with connect(warehouse) as con:
        add_citations(con, DAYS[0], 2, prefix="late")

    facts = publish_lake(warehouse, target, lake)

    assert facts["written"] == {"citations": ["2026-11-02"], "provenance_results": ["2026-11-02"]}
    assert read(target, "select count(*) from citations where request_id like 'late-%'") == [(2,)]


def test_a_crash_before_the_rename_leaves_the_previous_state(warehouse, tmp_path, monkeypatch):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    manifest_before = (lake / "_manifest.json").read_text()
    with connect(warehouse) as con:
        add_citations(con, DAYS[2], 3, prefix="new")
    real_replace = os.replace

    def crash_on_publish(src, dst):
        if Path(dst) == target:
            raise OSError("disk gone")
        return real_replace(src, dst)

    monkeypatch.setattr(publish_module.os, "replace", crash_on_publish)
    with pytest.raises(OSError, match="disk gone"):
        publish_lake(warehouse, target, lake)
    monkeypatch.undo()

    assert read(target, "select count(*) from citations") == [(18,)]  # the previous published state
    assert (lake / "_manifest.json").read_text() == manifest_before
    assert sorted(p.name for p in target.parent.iterdir() if p.name.startswith(target.name)) == [target.name]
    facts = publish_lake(warehouse, target, lake)
    assert read(target, "select count(*) from citations") == [(21,)]
    # the crashed attempt's files are kept while a published file might name them, then collected
    publish_lake(warehouse, target, lake)
    names = [f.name for f in (lake / "citations" / "day=2026-11-10").iterdir()]
    assert names == [f"part-{facts['generation']}.parquet"]


def test_the_published_file_opens_with_plain_duckdb_read_only(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    # a fresh process with nothing but duckdb (parquet is built in), from another directory
    script = (
        "import sys, duckdb\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "print(con.sql('select count(*), count(distinct day) from citations').fetchall()[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", script, str(target)], capture_output=True, text=True, cwd="/", check=True
    )
    assert out.stdout.strip() == "(18, 3)"


def test_a_review_decision_on_an_old_day_rewrites_that_days_queue(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    with connect(warehouse) as con:
        con.execute(
            "insert into citation_queue by name select citation_id, request_id, day, surface, "
            "'span_missing' as reason, 'provenance' as gate, 'team' as owner, claim, chunk_id, span, "
            "'absent' as provenance_verdict, 'span_missing' as provenance_reason, 'sha' as prompt_sha256, "
            "'f.jsonl' as source_file, 1 as source_line, 'open' as status, $now as queued_at from citations",
            {"now": NOW},
        )
    publish_lake(warehouse, target, lake)
    with connect(warehouse) as con:  # what sql/review/refresh_status.sql does; the reviewer's clock was behind
        con.execute(
            "update citation_queue set status = 'repaired', reviewed_by = 'ana', reviewed_at = $old "
            "where citation_id = (select min(citation_id) from citation_queue where day = $d)",
            {"old": datetime(2020, 1, 1, tzinfo=timezone.utc), "d": DAYS[0]},
        )

    facts = publish_lake(warehouse, target, lake)

    assert facts["written"] == {"citation_queue": ["2026-11-02"]}
    assert read(target, "select count(*) from citation_queue where status = 'repaired' and reviewed_by = 'ana'") == [
        (1,)
    ]


def test_the_lake_root_follows_storage_lake_then_the_default(tmp_path):
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.settings import resolve_beside

    config = tmp_path / "conf" / "citegate.toml"
    config.parent.mkdir()
    config.write_text('[storage]\nlake = "../shared lake"\n')
    warehouse = tmp_path / "data" / "audit.duckdb"
    assert load_config(config).storage.lake == "../shared lake"
    assert resolve_beside("lake", "", warehouse=warehouse, config=config, env={}) == tmp_path / "shared lake"
    env = {"CITEGATE_LAKE": str(tmp_path / "from-env")}
    assert resolve_beside("lake", "", warehouse=warehouse, config=config, env=env) == tmp_path / "from-env"
    assert resolve_beside("lake", "", warehouse=warehouse, config=None, env={}) == tmp_path / "data" / "audit.lake"
