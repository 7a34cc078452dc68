"""The lake: the large per-day tables as Delta Lake tables beside the warehouse, partitioned by day, written for
exactly the days that changed (an overwrite whose predicate names them), each day whole for every reader (the
published DuckDB file, polars' scan_delta, DuckDB over a version's file list), a crash leaving the previous state,
a re-run not doubling, two writers at once losing nothing, and the files no reader needs collected."""

import json
import os
import stat
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import polars as pl
import pytest
from deltalake import DeltaTable

import citegate_assets.lib.storage.publish as publish_module
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage.publish import publish_lake, published_versions
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

from .helpers import another_writer_commits_first, lake_versions, publish_elsewhere

DAYS = (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 10))
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)
CLAIM_NEEDLE = "QUOTEDCLAIMTEXTxqzv"


def add_citations(con, day: date, n: int, prefix: str = "r") -> None:
    con.execute(
        "insert into citations (citation_id, request_id, day, position, surface, answer_model, chunk_id, span, claim, "
        "span_normalized, claim_normalized, normalization_version, cited_as, location_mismatch) "
        "select $p || '-' || $day || '-' || i || '#0', $p || '-' || $day || '-' || i, $day, 0, "
        "'web', 'model-a', 'k' || i, 'span ' || i, $needle || ' claim ''' || i || '''', 'span ' || i, 'claim ' || i, "
        "'n1', null, null from range($n) t(i)",
        {"p": prefix, "day": day, "n": n, "needle": CLAIM_NEEDLE},
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


def data_files(lake: Path, table: str, day: str) -> list[str]:
    return sorted(f.name for f in (lake / table / f"day={day}").iterdir())


def test_publish_writes_day_partitioned_delta_tables_private_and_plain(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    previous_umask = os.umask(0o022)  # what delta-rs would create files with, left alone
    try:
        facts = publish_lake(warehouse, target, lake)
    finally:
        os.umask(previous_umask)

    days = [d.isoformat() for d in DAYS]
    assert facts["written"] == {"citations": days, "provenance_results": days}  # empty tables write nothing
    for spec in lake_module.LAKE_TABLES:  # every lake table is a Delta table, the empty ones too
        table = DeltaTable(lake / spec.name)
        assert table.metadata().partition_columns == [spec.column]
        protocol = table.protocol()  # plain Parquet: no deletion vectors, no column mapping
        assert (protocol.min_reader_version, protocol.reader_features) == (1, None)
        assert "delta.columnMapping.mode" not in table.metadata().configuration
        assert "delta.enableDeletionVectors" not in table.metadata().configuration
    table = DeltaTable(lake / "citations")
    files = table.file_uris()
    assert sorted(Path(f).parent.name for f in files) == [f"day={d}" for d in days]  # one file per day
    for file in files:
        # Hive convention: the partition column is in the path only (Spark and Trino refuse it twice)
        assert "day" not in pl.read_parquet_schema(file)
    # prompts hold user data: every folder and file of the lake is the owner's only
    for path in [lake, *lake.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    # the log holds counts, not column statistics: no text of a row is copied into a file forget cannot rewrite
    for log in (lake / "citations" / "_delta_log").iterdir():
        assert CLAIM_NEEDLE.encode() not in log.read_bytes()
    add = [
        json.loads(line)["add"]
        for line in (lake / "citations" / "_delta_log" / f"{0:020}.json").open()
        if '"add"' in line
    ]
    assert {json.loads(a["stats"])["numRecords"] for a in add} == {5, 6, 7}
    assert all(json.loads(a["stats"])["minValues"] == {} for a in add)

    assert read(target, "select day, count(*) from citations group by day order by day") == [
        (DAYS[0], 5),
        (DAYS[1], 6),
        (DAYS[2], 7),
    ]
    # the published file: views over exactly one version's files, which `lake_versions` names, plus copies
    views = {v for (v,) in read(target, "select view_name from duckdb_views() where not internal")}
    assert views == {"citations", "provenance_results"}
    assert read(target, "select count(*) from prompts") == [(0,)]  # empty lake table: same columns, no rows
    assert read(target, "select count(*) from schema_version") == read(warehouse, "select count(*) from schema_version")
    assert published_versions(target) == lake_versions(lake) == facts["versions"]
    [(view,)] = read(target, "select sql from duckdb_views() where view_name = 'citations'")
    assert sorted(f for f in files if f"'{f}'" in view) == sorted(files)
    [(uri, column)] = read(target, "select uri, partition_column from lake_versions where table_name = 'citations'")
    assert (uri, column) == (str((lake / "citations").absolute()), "day")


def test_direct_readers_scan_delta_and_duckdb_over_a_versions_files(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    expected = sorted(read(warehouse, "select citation_id, day, claim from citations"))

    frame = pl.scan_delta(str(lake / "citations")).select("citation_id", "day", "claim").collect()
    assert sorted(frame.iter_rows()) == expected
    assert frame.schema["day"] == pl.Date
    for spec in lake_module.LAKE_TABLES:  # every table reads, the empty ones included
        assert (
            pl.scan_delta(str(lake / spec.name)).collect().height
            == read(warehouse, f"select count(*) from {spec.name}")[0][0]
        )

    files = DeltaTable(lake / "citations").file_uris()
    assert sorted(files) == sorted(lake_module.current_files(lake, "citations"))
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
    [old_file] = data_files(lake, "citations", "2026-11-03")
    unchanged = publish_lake(warehouse, target, lake)
    assert unchanged["written"] == {}  # nothing changed: nothing rewritten, no new version
    assert unchanged["versions"] == first["versions"]
    # an analyst holds the current published file open while the day is re-run
    holder = duckdb.connect(str(target), read_only=True)
    try:
        with connect(warehouse) as con:  # the re-run replaces the day's rows (same count, new stamp)
            con.execute("delete from provenance_results where day = $d", {"d": DAYS[1]})
            con.execute("delete from citations where day = $d", {"d": DAYS[1]})
            add_citations(con, DAYS[1], 6)
        rerun = publish_lake(warehouse, target, lake, run_days=[DAYS[1]])
        assert rerun["written"] == {"citations": ["2026-11-03"], "provenance_results": ["2026-11-03"]}
        assert rerun["versions"]["citations"] == first["versions"]["citations"] + 1  # one commit per table
        assert old_file in data_files(lake, "citations", "2026-11-03")  # the previous published file names it
        assert holder.sql("select count(*) from citations").fetchall() == [(18,)]
    finally:
        holder.close()
    assert read(target, "select count(*) from citations where day = '2026-11-03'") == [(6,)]  # not doubled
    assert pl.scan_delta(str(lake / "citations")).collect().height == 18
    history = DeltaTable(lake / "citations").history(1)[0]
    assert history["operationParameters"]["predicate"] == "day = '2026-11-03'::date"  # that day, nothing else
    # the previous version still reads whole, from its own files
    previous = DeltaTable(lake / "citations", version=first["versions"]["citations"])
    assert pl.read_parquet(previous.file_uris(), hive_partitioning=True).height == 18
    publish_lake(warehouse, target, lake)
    # collected once no published file can name it; a reader of the oldest version no longer can
    [kept] = data_files(lake, "citations", "2026-11-03")
    assert kept != old_file


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
    before = target.read_bytes()
    named = set(DeltaTable(lake / "citations").file_uris())
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

    assert target.read_bytes() == before
    assert read(target, "select count(*) from citations") == [(18,)]  # the previous published state, readable
    assert all(Path(f).exists() for f in named)
    assert sorted(p.name for p in target.parent.iterdir() if p.name.startswith(target.name)) == [target.name]
    facts = publish_lake(warehouse, target, lake)
    assert facts["written"] == {}  # the crashed attempt's commit is in force: nothing to write again
    assert read(target, "select count(*) from citations") == [(21,)]
    # the version the crashed attempt replaced is kept while the published file before it might name it
    assert len(data_files(lake, "citations", "2026-11-10")) == 2
    publish_lake(warehouse, target, lake)
    assert len(data_files(lake, "citations", "2026-11-10")) == 1


def test_a_crash_between_a_tables_commits_rewrites_the_rest_next_time(warehouse, tmp_path, monkeypatch):
    """A table whose changed days take several commits, killed after the first: its version holds the days written
    whole and the others as they were, and the next publish writes exactly the others."""
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    with connect(warehouse) as con:
        for day in DAYS:
            add_citations(con, day, 1, prefix="more")
    monkeypatch.setattr(lake_module, "DAYS_PER_COMMIT", 1)
    import deltalake

    real_write = deltalake.write_deltalake
    commits: list[str] = []

    def crash_on_second_commit(table, data, **kwargs):
        citations = str(getattr(table, "table_uri", table)).rstrip("/").endswith("citations")
        if citations and commits:
            raise KeyboardInterrupt  # a kill between two commits
        real_write(table, data, **kwargs)
        if citations:
            commits.append(kwargs["predicate"])

    monkeypatch.setattr(deltalake, "write_deltalake", crash_on_second_commit)
    with pytest.raises(KeyboardInterrupt):
        publish_lake(warehouse, target, lake)
    monkeypatch.setattr(deltalake, "write_deltalake", real_write)
    assert commits == ["day IN ('2026-11-02')"]
    per_day = dict(pl.scan_delta(str(lake / "citations")).group_by("day").len().collect().iter_rows())
    assert per_day == {DAYS[0]: 6, DAYS[1]: 6, DAYS[2]: 7}  # day one new and whole, the others as before

    facts = publish_lake(warehouse, target, lake)

    assert facts["written"]["citations"] == ["2026-11-03", "2026-11-10"]
    assert read(target, "select count(*) from citations") == [(21,)]


def test_the_published_file_opens_with_plain_duckdb_read_only(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    # a fresh process with nothing but duckdb (parquet is built in, no extension loaded), from another directory
    script = (
        "import sys, duckdb\n"
        "con = duckdb.connect(sys.argv[1], read_only=True)\n"
        "views = [v for (v,) in con.sql('select view_name from duckdb_views() where not internal').fetchall()]\n"
        "print(sorted(views), [con.sql(f'select count(*) from {v}').fetchall()[0][0] for v in sorted(views)])\n"
        "loaded = \"select count(*) from duckdb_extensions() where loaded and extension_name = 'delta'\"\n"
        "print(con.sql(loaded).fetchall())\n"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", script, str(target)], capture_output=True, text=True, cwd="/", check=True
    )
    assert out.stdout.splitlines() == ["['citations', 'provenance_results'] [18, 18]", "[(0,)]"]


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


def publish_in_process(args: tuple) -> dict:
    """One writer of the concurrency test, in a process of its own."""
    warehouse, target, lake, days = args
    facts = publish_lake(Path(warehouse), Path(target), lake, run_days=[date.fromisoformat(d) for d in days])
    return {"versions": facts["versions"], "written": facts["written"]}


def test_two_writers_at_once_lose_nothing_and_duplicate_nothing(warehouse, tmp_path):
    """Two processes publishing the same warehouse to one lake at the same moment, re-running one day each and one
    day both: every commit lands or is planned again after the other's (delta-rs's conflict check), no version of
    any table holds a day twice or misses one, and both published files read every row."""
    import multiprocessing

    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    first = lake_versions(lake)["citations"]
    jobs = [
        (str(warehouse), str(tmp_path / "a.published.duckdb"), str(lake), ["2026-11-02", "2026-11-10"]),
        (str(warehouse), str(tmp_path / "b.published.duckdb"), str(lake), ["2026-11-03", "2026-11-10"]),
    ]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(publish_in_process, jobs)
        # its workers end on their own: leaving the block terminates them with SIGTERM, which a test process that ran
        # Dagster in process may have left ignored (Dagster maps SIGTERM to SIGINT's handler)
        pool.close()
        pool.join()

    table = DeltaTable(lake / "citations")
    assert table.version() >= first + 2  # both writers committed
    wanted = {DAYS[0]: 5, DAYS[1]: 6, DAYS[2]: 7}
    for version in range(first, table.version() + 1):
        files = DeltaTable(lake / "citations", version=version).file_uris()
        per_day = dict(pl.read_parquet(files, hive_partitioning=True).group_by("day").len().iter_rows())
        assert per_day == wanted, version
    for name, result in zip("ab", results):
        published = tmp_path / f"{name}.published.duckdb"
        assert read(published, "select day, count(*) from citations group by all order by 1") == sorted(wanted.items())
        assert result["written"]["citations"]  # each wrote its days


def test_a_commit_that_loses_the_race_on_its_days_is_planned_again(warehouse, tmp_path, monkeypatch):
    """Another writer replaces the same day between this write's snapshot and its commit: delta-rs refuses the
    commit (a concurrent transaction added data to the days it replaces), and the table is planned again from the
    new version, so the day is neither lost nor doubled in any version."""
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    first = lake_versions(lake)["citations"]
    other = tmp_path / "other.published.duckdb"
    ran = another_writer_commits_first(
        monkeypatch, "citations", lambda: publish_elsewhere(warehouse, other, lake, ["2026-11-03"])
    )

    facts = publish_lake(warehouse, target, lake, run_days=[DAYS[1]])

    assert ran == ["write", "other", "write"]  # refused once, written again from the other's version
    assert facts["written"]["citations"] == ["2026-11-03"]
    history = DeltaTable(lake / "citations").history(3)
    assert [h["version"] for h in history] == [first + 2, first + 1, first]  # the other's commit, then this one
    for version in range(first, first + 3):
        files = DeltaTable(lake / "citations", version=version).file_uris()
        per_day = dict(pl.read_parquet(files, hive_partitioning=True).group_by("day").len().iter_rows())
        assert per_day == {DAYS[0]: 5, DAYS[1]: 6, DAYS[2]: 7}, version
    assert read(target, "select count(*) from citations") == read(other, "select count(*) from citations") == [(18,)]


def test_a_crashed_writers_files_are_collected_once_old(warehouse, tmp_path):
    """A file in a table's folder that no version names (a writer killed before its commit) is kept while it may
    still be another writer's upload, and collected by the first publish after ORPHAN_AGE."""
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    [named] = data_files(lake, "citations", "2026-11-02")
    young = lake / "citations" / "day=2026-11-02" / "part-00000-young-c000.zstd.parquet"
    old = lake / "citations" / "day=2026-11-02" / "part-00000-old-c000.zstd.parquet"
    for orphan in (young, old):
        orphan.write_bytes((lake / "citations" / "day=2026-11-02" / named).read_bytes())
    stale = time.time() - (lake_module.ORPHAN_AGE + timedelta(minutes=5)).total_seconds()
    os.utime(old, (stale, stale))

    publish_lake(warehouse, target, lake)

    assert sorted(data_files(lake, "citations", "2026-11-02")) == sorted([named, young.name])
    assert read(target, "select count(*) from citations") == [(18,)]


def test_a_part_file_changed_by_hand_is_written_again(warehouse, tmp_path):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    files = DeltaTable(lake / "citations").file_uris()
    [damaged] = [f for f in files if "/day=2026-11-03/" in f]
    [other] = [f for f in files if "/day=2026-11-10/" in f]
    Path(damaged).write_bytes(Path(other).read_bytes())  # another day's rows, another size

    facts = publish_lake(warehouse, target, lake)

    assert facts["written"] == {"citations": ["2026-11-03"]}
    assert read(target, "select day, count(*) from citations group by all order by 1") == [
        (DAYS[0], 5),
        (DAYS[1], 6),
        (DAYS[2], 7),
    ]


def test_the_count_check_reads_the_log_and_still_refuses_a_wrong_count(warehouse, tmp_path, monkeypatch):
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    before = target.read_bytes()
    with connect(warehouse) as con:
        add_citations(con, DAYS[2], 2, prefix="late")
    real = lake_module.pinned_rows
    monkeypatch.setattr(lake_module, "pinned_rows", lambda table: real(table) - 1)  # a version's rows miscounted

    with pytest.raises(RuntimeError, match=r"publish: table main.citations has 19 rows in the copy, 20 in the source"):
        publish_lake(warehouse, target, lake)

    assert target.read_bytes() == before  # the previous published file, untouched
    monkeypatch.undo()
    publish_lake(warehouse, target, lake)
    assert read(target, "select count(*) from citations") == [(20,)]


def test_a_publish_that_reruns_a_day_never_opens_the_other_days_files(warehouse, tmp_path):
    """Deciding what to write reads the Delta log; binding the views reads the warehouse's columns; counting
    reads the log's numRecords: no data file of an unchanged day is opened."""
    target, lake = paths(tmp_path)
    publish_lake(warehouse, target, lake)
    others = [
        Path(f)
        for table in ("citations", "provenance_results")
        for f in DeltaTable(lake / table).file_uris()
        if "day=2026-11-02" not in f
    ]
    originals = {f: f.read_bytes() for f in others}
    for file, data in originals.items():
        file.write_bytes(b"\0" * len(data))  # same size, not Parquet: a publish that opened one would fail
    try:
        facts = publish_lake(warehouse, target, lake, run_days=[DAYS[0]])
    finally:
        for file, data in originals.items():
            file.write_bytes(data)
    assert facts["written"] == {"citations": ["2026-11-02"], "provenance_results": ["2026-11-02"]}
    assert read(target, "select day::varchar, count(*) from citations group by all order by 1") == [
        ("2026-11-02", 5),
        ("2026-11-03", 6),
        ("2026-11-10", 7),
    ]


def test_the_lake_root_follows_storage_lake_then_the_default(tmp_path):
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.core.paths import resolve_beside

    config = tmp_path / "conf" / "citegate.toml"
    config.parent.mkdir()
    config.write_text('[storage]\nlake = "../shared lake"\n')
    warehouse = tmp_path / "data" / "audit.duckdb"
    assert load_config(config).storage.lake == "../shared lake"
    assert resolve_beside("lake", "", warehouse=warehouse, config=config, env={}) == tmp_path / "shared lake"
    env = {"CITEGATE_LAKE": str(tmp_path / "from-env")}
    assert resolve_beside("lake", "", warehouse=warehouse, config=config, env=env) == tmp_path / "from-env"
    assert resolve_beside("lake", "", warehouse=warehouse, config=None, env={}) == tmp_path / "data" / "audit.lake"
