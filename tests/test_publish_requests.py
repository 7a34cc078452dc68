"""What a nightly publish reads of a lake on S3-compatible storage, counted by the server itself (moto's request log
on 127.0.0.1; the clients are the real delta-rs and s3fs over HTTP): over a 3-day and a 9-day history, the night that
re-runs one day reads (HEAD + GET) no more objects on the longer history and opens no data file it did not write,
because what to write is decided from the Delta log, the views are bound from the warehouse's columns, the counts
come from the log's numRecords, and the data files' sizes the log records are lent to s3fs."""

from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage import lake_store
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .s3_server import Request, S3Server, s3_server

START = date(2026, 11, 2)
SHORT, LONG = 3, 9


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


def nightly_after_history(s3: S3Server, root: Path, days: int, monkeypatch) -> tuple[list[Request], str, Path]:
    """A `days`-day history published to its own prefix, then the nightly run that re-runs its second day:
    (the requests the server received during that night, the lake's URI, the working file)."""
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    uri = f"s3://{s3.bucket}/{root.name}/lake"
    monkeypatch.setenv("CITEGATE_LAKE", uri)
    monkeypatch.setenv("CITEGATE_REVIEWS", str(root / "reviews"))
    landing, warehouse = root / "landing", root / "w.duckdb"
    generate_logs(landing, days=days, requests_per_day=4, seed=11, malformed=False)
    last = START + timedelta(days=days - 1)
    assert run_range(RunPlan(START, last), landing=landing, warehouse=warehouse, config_file=None).success
    rerun = START + timedelta(days=1)
    with s3.recording() as received:
        # only published_warehouse reaches the bucket, so these are the publish's requests
        assert run_range(RunPlan(rerun, rerun), landing=landing, warehouse=warehouse, config_file=None).success
    return received, uri, warehouse


def data_files(uri: str) -> dict[str, set[str]]:
    """Per table, the data files of its latest version, relative to the lake."""
    options = lake_store.storage_options()
    return {
        table: {f.removeprefix(uri + "/") for f in DeltaTable(f"{uri}/{table}", storage_options=options).file_uris()}
        for table in lake_module.LAKE_TABLE_NAMES
    }


def data_files_read(received: list[Request], written: set[str]) -> set[str]:
    """The data files a night read (HEAD or GET) that it did not write itself, relative to the lake."""
    return {
        target
        for r in received
        if r.kind in ("HEAD", "GET") and r.target.endswith(".parquet")
        for target in [r.target.split("/lake/", 1)[1]]
        if target not in written
    }


def test_a_nightly_publish_reads_no_more_objects_on_a_longer_history(s3, tmp_path, monkeypatch):
    # each history's first publish in one commit a table, so the two logs are as long and only the history differs
    monkeypatch.setattr(lake_module, "DAYS_PER_COMMIT", LONG)
    short_root, long_root = tmp_path / "short", tmp_path / "long"
    short_root.mkdir()
    long_root.mkdir()
    short_received, short_uri, _ = nightly_after_history(s3, short_root, SHORT, monkeypatch)
    long_received, long_uri, warehouse = nightly_after_history(s3, long_root, LONG, monkeypatch)
    short, long = Counter(r.kind for r in short_received), Counter(r.kind for r in long_received)

    # the longer history really has more files, and each night rewrote the same number of them
    files = {SHORT: data_files(short_uri), LONG: data_files(long_uri)}
    assert sum(map(len, files[LONG].values())) > sum(map(len, files[SHORT].values())) + 50
    written = {
        history: {
            r.target.split("/lake/", 1)[1]
            for r in received
            if r.method == "PUT" and r.target.endswith(".parquet") and r.status == 200
        }
        for history, received in ((SHORT, short_received), (LONG, long_received))
    }
    assert len(written[SHORT]) == len(written[LONG]) > 0
    print(f"requests per nightly publish: {SHORT} days {dict(short)}, {LONG} days {dict(long)}")
    assert long["HEAD"] + long["GET"] <= short["HEAD"] + short["GET"]
    assert long["LIST"] == short["LIST"]  # a page holds 1,000 keys
    assert long["PUT"] == short["PUT"]  # the new files and the commits
    # not one data file it did not write: what to write comes from the log, the views bind without a footer
    assert data_files_read(short_received, written[SHORT]) == data_files_read(long_received, written[LONG]) == set()

    # and the published file still reads every row of the working one, through the bucket
    published = warehouse.with_name("w.published.duckdb")
    with connect(published, read_only=True) as con:
        lake_store.register_for_views(con)
        con.execute(f"attach '{warehouse}' as work (read_only)")
        for table in lake_module.LAKE_TABLE_NAMES:
            [(only_working,)] = con.sql(
                f"select count(*) from (from work.main.{table} except all from {table})"
            ).fetchall()
            [(only_published,)] = con.sql(
                f"select count(*) from (from {table} except all from work.main.{table})"
            ).fetchall()
            assert (table, only_working, only_published) == (table, 0, 0)
