"""The lake on S3-compatible object storage (docs/object-storage.md), against moto's server on 127.0.0.1 reached
through the standard AWS variables: a real nightly run commits its Delta tables to the bucket (delta-rs, conditional
puts), the published DuckDB file (local) reads every table through s3:// views of one version's files, polars'
scan_delta reads every table, a re-run day is replaced by a new version whose superseded files go a publish later,
and two writers committing at once lose nothing and duplicate nothing."""

import hashlib
from collections import Counter
from datetime import date
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable

from citegate_assets.lib.core.paths import resolve, resolve_beside
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage import lake_store
from citegate_assets.lib.storage.publish import PUBLISHED_AS, publish_lake, published_versions
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import another_writer_commits_first, lake_versions, publish_elsewhere
from .s3_server import S3Server, s3_server

START, END = date(2026, 11, 2), date(2026, 11, 5)
DAYS = ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


@pytest.fixture
def lake_uri(s3: S3Server, tmp_path, monkeypatch) -> str:
    """A prefix of its own per test in the module's bucket, configured only through the AWS variables."""
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    uri = f"s3://{s3.bucket}/{tmp_path.name}/lake"
    monkeypatch.setenv("CITEGATE_LAKE", uri)
    return uri


@pytest.fixture
def nightly(tmp_path, dagster_home, monkeypatch, lake_uri):
    landing = tmp_path / "landing"
    generate_logs(landing, days=4, requests_per_day=10, seed=4, malformed=True)
    warehouse = tmp_path / "w.duckdb"
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))

    def run(start: date = START, end: date = END) -> dict:
        result = run_range(RunPlan(start, end), landing=landing, warehouse=warehouse, config_file=None)
        assert result.success
        [event] = [
            e.materialization
            for e in result.get_asset_materialization_events()
            if e.asset_key.to_user_string() == "published_warehouse"
        ]
        return {k: v.value for k, v in event.metadata.items()}

    return run, warehouse


def prefix_of(uri: str) -> str:
    return uri.split("/", 3)[3] + "/"


def objects(s3: S3Server, uri: str) -> list[str]:
    """The keys under the lake, relative to it, as the bucket lists them."""
    prefix = prefix_of(uri)
    return [key.removeprefix(prefix) for key in s3.keys(prefix)]


def data_objects(s3: S3Server, uri: str) -> set[str]:
    return {key for key in objects(s3, uri) if "/_delta_log/" not in key}


def named(uri: str, table: str, version: int | None = None) -> set[str]:
    """The data files a table version names, relative to the lake."""
    files = DeltaTable(f"{uri}/{table}", version=version, storage_options=lake_store.storage_options()).file_uris()
    return {f.removeprefix(uri + "/") for f in files}


def differences(warehouse: Path, published: Path) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Per table of the working file: (rows only in it, rows only in the published file), equal ones omitted.
    The published file's views read the bucket through s3fs, registered as any citegate reader does."""
    with connect(published, read_only=True) as con:
        lake_store.register_for_views(con)
        con.execute(f"attach '{warehouse}' as work (read_only)")
        tables = [  # the published name of each table: prompt_rows is published as `prompts` (lib/storage/publish.py)
            PUBLISHED_AS.get(f"main.{t}", f"main.{t}").removeprefix("main.")
            for (t,) in con.sql(
                "select table_name from duckdb_tables() where database_name = 'work' and schema_name = 'main'"
            ).fetchall()
        ]
        out = {}
        for t in tables:
            [(only_working,)] = con.sql(f"select count(*) from (from work.main.{t} except all from {t})").fetchall()
            [(only_published,)] = con.sql(f"select count(*) from (from {t} except all from work.main.{t})").fetchall()
            if only_working or only_published:
                out[t] = (only_working, only_published)
    return out, tables


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_nightly_run_commits_delta_tables_to_the_bucket_and_the_published_file_reads_them(nightly, s3, lake_uri):
    run, warehouse = nightly
    meta = run()
    published = warehouse.with_name("w.published.duckdb")

    assert meta["lake"] == lake_uri
    assert not warehouse.with_name("w.lake").exists()  # nothing written to a local lake
    keys = objects(s3, lake_uri)
    assert {key.split("/")[0] for key in keys} == set(lake_module.LAKE_TABLE_NAMES)  # one Delta table each
    assert all(f"{t}/_delta_log/{0:020}.json" in keys for t in lake_module.LAKE_TABLE_NAMES)
    # exactly: the logs, and the files the tables' versions name
    assert data_objects(s3, lake_uri) == {f for t in lake_module.LAKE_TABLE_NAMES for f in named(lake_uri, t)}
    assert meta["partitions_written"]["prompts"] == DAYS
    assert meta["lake_versions"] == lake_versions(lake_uri) == published_versions(published)
    with connect(warehouse, read_only=True) as con:
        per_day = dict(con.sql("select day::varchar, count(*) from citations group by day").fetchall())
        [(citations,)] = con.sql("select count(*) from citations").fetchall()

    diff, tables = differences(warehouse, published)
    assert diff == {}
    assert {"prompts", "citations", "provenance_results", "metric_lineage", "citation_queue"} <= set(tables)
    with connect(published, read_only=True) as con:
        [(view,)] = con.sql("select sql from duckdb_views() where view_name = 'citations'").fetchall()
    assert all(f"'{lake_uri}/{f}'" in view for f in named(lake_uri, "citations"))
    # two readers at once (as `citegate serve` holds them) share one database instance: s3fs registered once
    with connect(published, read_only=True) as first, connect(published, read_only=True) as second:
        lake_store.register_for_views(first)
        lake_store.register_for_views(second)
        assert first.sql("select count(*) from citations").fetchall() == [(citations,)]
        assert second.sql("select count(*) from citations").fetchall() == [(citations,)]
    assert published.stat().st_size < warehouse.stat().st_size  # the large tables are not copied

    options = lake_store.storage_options()
    for table in lake_module.LAKE_TABLE_NAMES:  # polars reads every table with no citegate code but the options
        frame = pl.scan_delta(f"{lake_uri}/{table}", storage_options=options).collect()
        with connect(warehouse, read_only=True) as con:
            assert frame.height == con.sql(f"select count(*) from {table}").fetchall()[0][0], table
    frame = pl.scan_delta(f"{lake_uri}/citations", storage_options=options).collect()
    assert frame.height == citations and citations > 0
    assert frame.schema["day"] == pl.Date
    assert dict(frame.group_by(pl.col("day").cast(pl.String)).len().iter_rows()) == per_day


def test_a_rerun_day_is_a_new_version_whose_superseded_files_go_at_the_next_publish(nightly, s3, lake_uri):
    run, warehouse = nightly
    run()
    published = warehouse.with_name("w.published.duckdb")
    first = lake_versions(lake_uri)
    before = data_objects(s3, lake_uri)

    meta = run(date(2026, 11, 3), date(2026, 11, 3))

    written = meta["partitions_written"]
    assert written["prompts"] == written["citations"] == written["provenance_results"] == ["2026-11-03"]
    second = lake_versions(lake_uri)
    added = data_objects(s3, lake_uri) - before
    assert added == {f for t in written for f in named(lake_uri, t) - named(lake_uri, t, first[t])}
    assert all(len({f for f in added if f.startswith(f"{t}/")}) == 1 for t in written)  # one new object a table
    replaced = {f for t in written for f in named(lake_uri, t, first[t]) - named(lake_uri, t)}
    assert replaced and replaced <= data_objects(s3, lake_uri)  # kept: a reader may hold the previous file
    assert differences(warehouse, published)[0] == {}

    facts = publish_lake(warehouse, published, lake_uri)  # the next publish (nothing changed)

    assert facts["written"] == {}
    assert facts["removed"] == len(replaced)
    assert data_objects(s3, lake_uri) == {f for t in lake_module.LAKE_TABLE_NAMES for f in named(lake_uri, t)}
    assert {t: v for t, v in lake_versions(lake_uri).items() if t not in written} == {
        t: v for t, v in second.items() if t not in written
    }
    assert differences(warehouse, published)[0] == {}


def publish_in_process(args: tuple) -> dict:
    """One writer of the concurrency test, in a process of its own (the AWS variables inherited), starting at the
    same moment as the other once both have imported everything (the barrier)."""
    warehouse, target, lake, days, both_ready = args
    both_ready.wait(timeout=240)
    facts = publish_lake(Path(warehouse), Path(target), lake, run_days=[date.fromisoformat(d) for d in days])
    return facts["written"]


def test_two_writers_committing_at_once_lose_nothing_and_duplicate_nothing(nightly, s3, lake_uri, tmp_path):
    """Two processes publishing to the bucket at the same moment, each re-running a day of its own and one day
    both: delta-rs commits through conditional puts (a lost race is a 412, retried or planned again), no version of
    any table holds a day twice or misses one, and both published files read every working row."""
    import multiprocessing

    run, warehouse = nightly
    run()
    first = lake_versions(lake_uri)
    spawn = multiprocessing.get_context("spawn")
    with spawn.Manager() as manager, s3.recording() as received:
        both_ready = manager.Barrier(2)
        jobs = [
            (str(warehouse), str(tmp_path / f"{name}.published.duckdb"), lake_uri, days, both_ready)
            for name, days in (("a", ["2026-11-02", "2026-11-05"]), ("b", ["2026-11-04", "2026-11-05"]))
        ]
        with spawn.Pool(2) as pool:
            results = pool.map(publish_in_process, jobs, chunksize=1)
            pool.close()  # the workers end on their own, not by SIGTERM (tests/test_lake.py says why)
            pool.join()

    assert all(result["prompts"] for result in results)
    commits = Counter(r.status for r in received if r.method == "PUT" and "/citations/_delta_log/0" in r.target)
    print(f"commits of citations: {dict(commits)} (412: a lost race on the commit's name)")
    assert commits[200] >= 2  # both writers committed
    assert lake_versions(lake_uri)["citations"] >= first["citations"] + 2
    with connect(warehouse, read_only=True) as con:
        wanted = dict(con.sql("select day, count(*) from citations group by all").fetchall())
    options = lake_store.storage_options()
    latest = lake_versions(lake_uri)["citations"]
    for version in range(first["citations"], latest + 1):
        table = DeltaTable(f"{lake_uri}/citations", version=version, storage_options=options)
        per_day = dict(pl.scan_delta(table).group_by("day").len().collect().iter_rows())
        assert per_day == wanted, version
    for name in "ab":
        assert differences(warehouse, tmp_path / f"{name}.published.duckdb")[0] == {}


def test_a_commit_that_loses_the_race_on_the_bucket_is_planned_again(nightly, s3, lake_uri, tmp_path, monkeypatch):
    """Another writer commits the same day between this write's snapshot and its commit: delta-rs finds the other's
    commit replaced those days and refuses this one (its version's name is never put twice: conditional puts), and
    the table is planned again: no version holds the day twice or misses it."""
    run, warehouse = nightly
    run()
    published = warehouse.with_name("w.published.duckdb")
    first = lake_versions(lake_uri)["citations"]
    other = tmp_path / "other.published.duckdb"
    ran = another_writer_commits_first(
        monkeypatch, "citations", lambda: publish_elsewhere(warehouse, other, lake_uri, ["2026-11-03"])
    )

    with s3.recording() as received:
        facts = publish_lake(warehouse, published, lake_uri, run_days=[date(2026, 11, 3)])

    assert ran == ["write", "other", "write"]
    assert facts["written"]["citations"] == ["2026-11-03"]
    lost = [
        r for r in received if r.method == "PUT" and r.target.endswith(f"/citations/_delta_log/{first + 1:020}.json")
    ]
    # that version's name was put once, by the other (a second put would be refused: If-None-Match, a 412)
    assert [r.status for r in lost].count(200) == 1
    with connect(warehouse, read_only=True) as con:
        wanted = dict(con.sql("select day, count(*) from citations group by all").fetchall())
    options = lake_store.storage_options()
    assert lake_versions(lake_uri)["citations"] == first + 2
    for version in range(first, first + 3):
        table = DeltaTable(f"{lake_uri}/citations", version=version, storage_options=options)
        assert dict(pl.scan_delta(table).group_by("day").len().collect().iter_rows()) == wanted, version
    assert differences(warehouse, published)[0] == {} and differences(warehouse, other)[0] == {}


def test_the_s3_store_lists_reads_and_deletes_through_delta_rs_and_names_a_missing_bucket(s3, lake_uri):
    store = lake_store.open_store(lake_uri)
    store.prepare()
    assert store.files("") == {} and store.read("nothing.json") is None
    with pytest.raises(lake_store.LakeStoreError, match="s3://no-such-bucket/lake: bucket 'no-such-bucket' not reach"):
        lake_store.open_store("s3://no-such-bucket/lake").prepare()


def test_an_s3_lake_is_kept_as_a_uri_by_every_setting_source(tmp_path):
    config = tmp_path / "conf" / "citegate.toml"
    config.parent.mkdir()
    config.write_text('[storage]\nlake = "s3://shared-bucket/citegate/"\n')
    warehouse = tmp_path / "data" / "audit.duckdb"
    assert resolve_beside("lake", "", warehouse=warehouse, config=config, env={}) == "s3://shared-bucket/citegate"
    env = {"CITEGATE_LAKE": "s3://from-env/lake"}
    assert resolve_beside("lake", "", warehouse=warehouse, config=config, env=env) == "s3://from-env/lake"
    settings = resolve(config=str(config), warehouse=str(warehouse), lake="s3://flag/lake", env={}, cwd=tmp_path)
    assert settings.lake == "s3://flag/lake"
    assert "s3://flag/lake  (from --lake)" in "\n".join(settings.describe())
    with pytest.raises(lake_store.LakeStoreError, match="gs://b/l: the lake must be a folder or an s3:// URI"):
        lake_store.open_store("gs://b/l")
