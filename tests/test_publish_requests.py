"""What a nightly publish reads of the lake (issue 16). On S3-compatible storage, counted by the server itself
(moto's request log on 127.0.0.1; the clients are the real boto3 and s3fs over HTTP): over a 3-day and a 9-day
history, the night that re-runs one day reads (HEAD + GET) no more objects on the longer history, because the
unchanged partitions are counted from the manifest (rows and bytes checked when each file was written) and the
views bound from its columns and the files' Parquet field ids, not from footers. On a local lake: a publish
that re-runs a day never opens the other days' files, a file changed by hand is written again, a lake from
before sizes and field ids is kept and read, and the count check still fails on a wrong manifest."""

import json
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest

from citegate_assets.lib import lake as lake_module
from citegate_assets.lib import lake_store
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.publish import publish_lake
from citegate_assets.lib.warehouse import connect, ensure_schema
from citegate_assets.pipeline import RunPlan, run_range

from .s3_server import Request, S3Server, s3_server
from .test_lake import add_citations

START = date(2026, 11, 2)
SHORT, LONG = 3, 9


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


def nightly_after_history(s3: S3Server, root: Path, days: int, monkeypatch) -> tuple[list[Request], dict, Path]:
    """A `days`-day history published to its own prefix, then the nightly run that re-runs its second day:
    (the requests the server received during that night, the lake's manifest after it, the working file)."""
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
    return received, lake_module.read_manifest(uri), warehouse


def old_files_read(received: list[Request], manifest: dict) -> set[str]:
    """The partition files a night read (HEAD or GET) that it did not write itself, relative to the lake."""
    own = f"/part-{manifest['generation']}.parquet"
    return {
        r.target.split("/lake/", 1)[1]
        for r in received
        if r.kind in ("HEAD", "GET") and r.target.endswith(".parquet") and not r.target.endswith(own)
    }


def test_a_nightly_publish_reads_no_more_objects_on_a_longer_history(s3, tmp_path, monkeypatch):
    short_root, long_root = tmp_path / "short", tmp_path / "long"
    short_root.mkdir()
    long_root.mkdir()
    short_received, short_manifest, _ = nightly_after_history(s3, short_root, SHORT, monkeypatch)
    long_received, long_manifest, warehouse = nightly_after_history(s3, long_root, LONG, monkeypatch)
    short, long = Counter(r.kind for r in short_received), Counter(r.kind for r in long_received)

    # the longer history really has more partitions, and each night rewrote the same number of them
    assert len(lake_module.manifest_files(long_manifest)) > len(lake_module.manifest_files(short_manifest)) + 50
    rewritten = {
        history: sum(p["file"].endswith(f"part-{m['generation']}.parquet") for p in parts_of(m))
        for history, m in ((SHORT, short_manifest), (LONG, long_manifest))
    }
    assert rewritten[SHORT] == rewritten[LONG] > 0
    print(f"requests per nightly publish: {SHORT} days {dict(short)}, {LONG} days {dict(long)}")
    assert long["HEAD"] + long["GET"] <= short["HEAD"] + short["GET"]
    assert long["LIST"] == short["LIST"]  # one listing per table (a page holds 1,000 keys)
    assert long["PUT"] == short["PUT"] == rewritten[LONG] + 2  # the new files, the generation record, the manifest
    # not one file it did not write: the views bind from the manifest's columns and field ids, not a footer
    assert old_files_read(short_received, short_manifest) == old_files_read(long_received, long_manifest) == set()

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


def parts_of(manifest: dict) -> list[dict]:
    return [part for table in manifest["tables"].values() for part in table["parts"].values()]


LOCAL_DAYS = (date(2026, 11, 2), date(2026, 11, 3), date(2026, 11, 4), date(2026, 11, 10))


@pytest.fixture
def local(tmp_path) -> tuple[Path, Path, Path]:
    """A working file with citations and provenance results on four days, published once to a local lake:
    (working file, published file, lake)."""
    warehouse = tmp_path / "w.duckdb"
    with connect(warehouse) as con:
        ensure_schema(con)
        for i, day in enumerate(LOCAL_DAYS):
            add_citations(con, day, 3 + i)
    target, lake = tmp_path / "w.published.duckdb", tmp_path / "w.lake"
    publish_lake(warehouse, target, lake)
    return warehouse, target, lake


def rows(path: Path, sql: str) -> list[tuple]:
    with connect(path, read_only=True) as con:
        return con.sql(sql).fetchall()


def part_files(lake: Path, table: str) -> dict[str, Path]:
    parts = json.loads((lake / "_manifest.json").read_text())["tables"][table]["parts"]
    return {day: lake / part["file"] for day, part in parts.items()}


def test_a_publish_that_reruns_the_first_day_never_opens_the_other_days_files(local):
    warehouse, target, lake = local
    unchanged = {
        table: {day: f for day, f in part_files(lake, table).items() if day != "2026-11-02"}
        for table in ("citations", "provenance_results")
    }
    originals = {f: f.read_bytes() for files in unchanged.values() for f in files.values()}
    for file, data in originals.items():
        file.write_bytes(b"\0" * len(data))  # same size, not Parquet: a publish that opened one would fail

    facts = publish_lake(warehouse, target, lake, run_days=[LOCAL_DAYS[0]])

    assert facts["written"] == {"citations": ["2026-11-02"], "provenance_results": ["2026-11-02"]}
    [(view,)] = rows(target, "select sql from duckdb_views() where view_name = 'citations'")
    assert "schema" in view  # bound from the manifest's columns and field ids
    for file, data in originals.items():
        file.write_bytes(data)  # what the previous publish wrote, for the reads below
    assert rows(target, "select day::varchar, count(*) from citations group by all order by 1") == [
        ("2026-11-02", 3),
        ("2026-11-03", 4),
        ("2026-11-04", 5),
        ("2026-11-10", 6),
    ]
    assert same_rows(warehouse, target, "citations")


def same_rows(warehouse: Path, published: Path, table: str) -> bool:
    with connect(published, read_only=True) as con:
        con.execute(f"attach '{warehouse}' as work (read_only)")
        [(only_working,)] = con.sql(f"select count(*) from (from work.{table} except all from {table})").fetchall()
        [(only_published,)] = con.sql(f"select count(*) from (from {table} except all from work.{table})").fetchall()
    return only_working == only_published == 0


def test_a_part_file_changed_by_hand_is_written_again(local):
    warehouse, target, lake = local
    manifest = json.loads((lake / "_manifest.json").read_text())
    part = manifest["tables"]["citations"]["parts"]["2026-11-03"]
    file = lake / part["file"]
    assert part["bytes"] == file.stat().st_size and part["rows"] == 4
    file.write_bytes(part_files(lake, "citations")["2026-11-10"].read_bytes())  # another day's rows

    facts = publish_lake(warehouse, target, lake)

    assert facts["written"] == {"citations": ["2026-11-03"]}
    assert same_rows(warehouse, target, "citations")


def test_the_count_check_reads_the_manifest_and_still_refuses_a_wrong_one(local, monkeypatch):
    warehouse, target, lake = local
    before = target.read_bytes()
    with connect(warehouse) as con:
        add_citations(con, LOCAL_DAYS[3], 2, prefix="late")
    real = lake_module.manifest_rows
    monkeypatch.setattr(lake_module, "manifest_rows", lambda entry: real(entry) - 1)  # a part's rows miscounted

    with pytest.raises(RuntimeError, match=r"publish: table main.citations has 19 rows in the copy, 20 in the source"):
        publish_lake(warehouse, target, lake)

    assert target.read_bytes() == before  # the previous published file, untouched
    monkeypatch.undo()
    publish_lake(warehouse, target, lake)
    assert rows(target, "select count(*) from citations") == [(20,)]


def test_a_lake_from_before_sizes_and_field_ids_is_kept_and_still_read(local):
    """A lake published by a citegate that recorded neither each part's bytes nor field ids: its next publish
    takes the sizes from the listing and writes nothing but a part whose file is gone; a view over parts
    without field ids binds from its first file's footer instead (the files are the same either way)."""
    warehouse, target, lake = local
    manifest = json.loads((lake / "_manifest.json").read_text())
    for table in manifest["tables"].values():
        for part in table["parts"].values():
            del part["bytes"], part["field_ids"]
    (lake / "_manifest.json").write_text(json.dumps(manifest))
    part_files(lake, "provenance_results")["2026-11-04"].unlink()

    facts = publish_lake(warehouse, target, lake)

    assert facts["written"] == {"provenance_results": ["2026-11-04"]}
    after = json.loads((lake / "_manifest.json").read_text())["tables"]["citations"]["parts"]
    assert {day: part["bytes"] for day, part in after.items()} == {
        day: f.stat().st_size for day, f in part_files(lake, "citations").items()
    }
    assert same_rows(warehouse, target, "provenance_results")
    assert same_rows(warehouse, target, "citations")
    views = dict(rows(target, "select view_name, sql from duckdb_views() where not internal"))
    assert "schema" not in views["citations"] and "schema" not in views["provenance_results"]  # footer binding
