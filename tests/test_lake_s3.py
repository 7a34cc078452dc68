"""The lake on S3-compatible object storage (issue 16, docs/object-storage.md), against moto's server on
127.0.0.1 reached through the standard AWS variables: a real nightly run writes its day files and manifests to
the bucket, the published DuckDB file (local) reads every table through s3:// views, polars reads the manifest's
files, a re-run day is replaced by one new object per table, and of two publishers racing on the manifest
exactly one wins while the other fails naming the object and leaves nothing of its own behind."""

import hashlib
import json
import shutil
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from citegate_assets.lib import lake as lake_module
from citegate_assets.lib import lake_store
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.publish import PUBLISHED_AS, publish_lake
from citegate_assets.lib.settings import resolve, resolve_beside
from citegate_assets.lib.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

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


def manifest_of(s3: S3Server, uri: str) -> dict:
    body = s3.client().get_object(Bucket=s3.bucket, Key=prefix_of(uri) + "_manifest.json")["Body"].read()
    return json.loads(body)


def differences(warehouse: Path, published: Path) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Per table of the working file: (rows only in it, rows only in the published file), equal ones omitted.
    The published file's views read the bucket through s3fs, registered as any citegate reader does."""
    with connect(published, read_only=True) as con:
        lake_store.register_for_views(con)
        con.execute(f"attach '{warehouse}' as work (read_only)")
        tables = [  # the published name of each table: prompt_rows is published as `prompts` (lib/publish.py)
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


def test_a_nightly_run_writes_the_lake_to_the_bucket_and_the_published_file_reads_it(nightly, s3, lake_uri):
    run, warehouse = nightly
    meta = run()
    published = warehouse.with_name("w.published.duckdb")

    assert meta["lake"] == lake_uri
    assert not warehouse.with_name("w.lake").exists()  # nothing written to a local lake
    manifest = manifest_of(s3, lake_uri)
    generation = manifest["generation"]
    keys = objects(s3, lake_uri)
    # exactly: the manifest, this publish's record, and one object per partition the manifest names
    assert sorted(keys) == sorted(
        ["_manifest.json", f"_manifests/{generation}.json", *lake_module.manifest_files(manifest)]
    )
    assert manifest == json.loads(
        s3.client()
        .get_object(Bucket=s3.bucket, Key=prefix_of(lake_uri) + f"_manifests/{generation}.json")["Body"]
        .read()
    )
    assert sorted(manifest["tables"]["prompts"]["parts"]) == DAYS
    assert meta["partitions_written"]["prompts"] == DAYS
    with connect(warehouse, read_only=True) as con:
        per_day = dict(con.sql("select day::varchar, count(*) from citations group by day").fetchall())
        [(citations,)] = con.sql("select count(*) from citations").fetchall()
    assert {day: part["rows"] for day, part in manifest["tables"]["citations"]["parts"].items()} == per_day
    assert all(
        part["file"] == f"citations/day={day}/part-{generation}.parquet"
        for day, part in manifest["tables"]["citations"]["parts"].items()
    )

    diff, tables = differences(warehouse, published)
    assert diff == {}
    assert {"prompts", "citations", "provenance_results", "metric_lineage", "citation_queue"} <= set(tables)
    with connect(published, read_only=True) as con:
        [(view,)] = con.sql("select sql from duckdb_views() where view_name = 'citations'").fetchall()
    assert f"'{lake_uri}/citations/day=2026-11-02/part-{generation}.parquet'" in view
    # two readers at once (as `citegate serve` holds them) share one database instance: s3fs registered once
    with connect(published, read_only=True) as first, connect(published, read_only=True) as second:
        lake_store.register_for_views(first)
        lake_store.register_for_views(second)
        assert first.sql("select count(*) from citations").fetchall() == [(citations,)]
        assert second.sql("select count(*) from citations").fetchall() == [(citations,)]
    assert published.stat().st_size < warehouse.stat().st_size  # the large tables are not copied

    urls = lake_module.current_urls(lake_uri, "citations")
    assert urls == [f"{lake_uri}/citations/day={day}/part-{generation}.parquet" for day in DAYS]
    frame = pl.scan_parquet(urls, hive_partitioning=True, storage_options=lake_store.polars_storage_options()).collect()
    assert frame.height == citations and citations > 0
    assert frame.schema["day"] == pl.Date
    assert dict(frame.group_by(pl.col("day").cast(pl.String)).len().iter_rows()) == per_day


def test_a_rerun_day_adds_one_object_per_changed_table_and_the_old_one_goes_at_the_next_publish(nightly, s3, lake_uri):
    run, warehouse = nightly
    run()
    published = warehouse.with_name("w.published.duckdb")
    first = manifest_of(s3, lake_uri)
    before = set(objects(s3, lake_uri))

    meta = run(date(2026, 11, 3), date(2026, 11, 3))

    second = manifest_of(s3, lake_uri)
    generation = second["generation"]
    written = meta["partitions_written"]
    assert written["prompts"] == written["citations"] == written["provenance_results"] == ["2026-11-03"]
    added = set(objects(s3, lake_uri)) - before
    new_parts = {
        f"{table}/{second['tables'][table]['partition_column']}={part}/part-{generation}.parquet"
        for table, parts in written.items()
        for part in parts
    }
    assert added == new_parts | {f"_manifests/{generation}.json"}
    assert all(len(parts) == 1 for parts in written.values())  # one new object per changed table
    replaced = {first["tables"][t]["parts"][p]["file"] for t, parts in written.items() for p in parts}
    assert replaced <= set(objects(s3, lake_uri))  # kept: a reader may hold the previous published file
    assert differences(warehouse, published)[0] == {}

    facts = publish_lake(warehouse, published, lake_uri)  # the next publish (nothing changed)

    assert facts["written"] == {}
    assert facts["removed"] == len(replaced)
    after = set(objects(s3, lake_uri))
    assert not replaced & after
    assert after == lake_module.manifest_files(second) | {
        "_manifest.json",
        f"_manifests/{generation}.json",
        f"_manifests/{facts['generation']}.json",
    }
    assert differences(warehouse, published)[0] == {}


def test_two_publishers_racing_on_the_manifest_one_wins_the_other_fails_naming_it(
    nightly, s3, lake_uri, tmp_path, monkeypatch
):
    run, warehouse_a = nightly
    run()
    published_a = warehouse_a.with_name("w.published.duckdb")
    warehouse_b = tmp_path / "b" / "w.duckdb"  # a second machine publishing to the same lake
    warehouse_b.parent.mkdir()
    shutil.copyfile(warehouse_a, warehouse_b)
    shutil.copytree(warehouse_a.with_name("w.text"), warehouse_b.with_name("w.text"))  # its prompt text
    published_b = warehouse_b.with_name("w.published.duckdb")
    publish_lake(warehouse_b, published_b, lake_uri)
    b_before = digest(published_b)
    real_record = lake_module.record_generation
    real_check = lake_module.check_unchanged
    losers: list[str] = []
    winners: list[dict] = []

    def a_wins_meanwhile(lake, manifest):
        """B has read the manifest and uploaded its day files; A publishes all the way before B goes on."""
        if not losers:
            losers.append(manifest["generation"])
            winners.append(publish_lake(warehouse_a, published_a, lake_uri, run_days=[date(2026, 11, 4)]))
        return real_record(lake, manifest)

    monkeypatch.setattr(lake_module, "record_generation", a_wins_meanwhile)
    manifest_url = f"{lake_uri}/_manifest.json"

    # B notices before replacing its published file
    with pytest.raises(lake_module.LakeConflict, match=f"{manifest_url}: changed since this publish read it"):
        publish_lake(warehouse_b, published_b, lake_uri, run_days=[date(2026, 11, 2)])
    assert_a_won_and_b_left_nothing(s3, lake_uri, winners[-1], losers[-1], warehouse_a, published_a)
    assert digest(published_b) == b_before

    # the conditional put decides even when both pass the early check: B's published file is put back
    losers.clear()
    monkeypatch.setattr(lake_module, "check_unchanged", lambda lake, expected: None)
    with pytest.raises(lake_module.LakeConflict, match=f"{manifest_url}: changed since this publish read it"):
        publish_lake(warehouse_b, published_b, lake_uri, run_days=[date(2026, 11, 2)])
    assert_a_won_and_b_left_nothing(s3, lake_uri, winners[-1], losers[-1], warehouse_a, published_a)
    assert digest(published_b) == b_before
    assert sorted(p.name for p in published_b.parent.iterdir() if p.name.startswith(published_b.name)) == [
        published_b.name
    ]

    # B's next publish, alone, succeeds on top of A's
    monkeypatch.setattr(lake_module, "record_generation", real_record)
    monkeypatch.setattr(lake_module, "check_unchanged", real_check)
    facts = publish_lake(warehouse_b, published_b, lake_uri)
    assert manifest_of(s3, lake_uri)["generation"] == facts["generation"]
    assert differences(warehouse_b, published_b)[0] == {}


def assert_a_won_and_b_left_nothing(
    s3: S3Server, uri: str, a: dict, b_generation: str, warehouse_a: Path, published_a: Path
) -> None:
    manifest = manifest_of(s3, uri)
    assert manifest["generation"] == a["generation"]
    assert a["written"]["prompts"] == ["2026-11-04"]
    keys = set(objects(s3, uri))
    assert lake_module.manifest_files(manifest) <= keys  # every file the manifest names is there
    assert not [k for k in keys if b_generation in k]  # nothing of the loser's: no record, no day file
    assert differences(warehouse_a, published_a)[0] == {}


def test_the_s3_store_refuses_to_overwrite_what_another_publisher_wrote(s3, lake_uri):
    store = lake_store.open_store(lake_uri)
    store.prepare()
    store.create("_manifests/x.json", b"{}")
    with pytest.raises(lake_store.LakeConflict, match=f"{lake_uri}/_manifests/x.json: already exists"):
        store.create("_manifests/x.json", b"{}")
    store.replace("_manifest.json", b"1", None)
    found = store.read("_manifest.json")
    assert found is not None and found[0] == b"1"
    with pytest.raises(lake_store.LakeConflict, match=f"{lake_uri}/_manifest.json: changed"):
        store.replace("_manifest.json", b"2", None)  # it exists now
    store.replace("_manifest.json", b"3", found[1])
    with pytest.raises(lake_store.LakeConflict, match=f"{lake_uri}/_manifest.json: changed"):
        store.replace("_manifest.json", b"4", found[1])  # a stale ETag
    assert store.read("_manifest.json")[0] == b"3"
    assert store.list("_manifests/") == ["_manifests/x.json"]
    with pytest.raises(lake_store.LakeStoreError, match="bucket 'no-such-bucket' not reachable"):
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
