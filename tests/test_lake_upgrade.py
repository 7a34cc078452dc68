"""A lake written by the release before Delta tables (its own manifest: `_manifest.json`, `_manifests/`,
`part-<generation>.parquet` day files; tests/fixtures/lake-09cfdd4.tar.gz, made by
tests/fixtures/make_release_lake.sh with that release's code) is converted in place by `citegate run`: Delta tables
written from the warehouse, the old files removed once the first published file naming the Delta files is in place,
never before; a reader helper refuses the old lake naming the command that converts it."""

import re
import shutil
import tarfile
from pathlib import Path

import polars as pl
import pytest
from deltalake import DeltaTable

import citegate_assets.lib.storage.publish as publish_module
from citegate_assets.cli import main
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage.publish import PUBLISHED_AS, publish_lake
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

FIXTURES = Path(__file__).parent / "fixtures"
OLD_PART = re.compile(r"part-\d{8}T\d{12}Z-\d+\.parquet$")


@pytest.fixture
def released(tmp_path) -> tuple[Path, Path]:
    """The release's warehouse, its text files and its lake, as it left them: (warehouse, lake)."""
    with tarfile.open(FIXTURES / "lake-09cfdd4.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    warehouse, lake = tmp_path / "w.duckdb", tmp_path / "w.lake"
    assert (lake / "_manifest.json").is_file() and any(lake.rglob("part-*.parquet"))
    return warehouse, lake


def old_files(lake: Path) -> list[str]:
    """Every file of the earlier format under the lake."""
    return sorted(
        str(p.relative_to(lake))
        for p in lake.rglob("*")
        if p.is_file() and (OLD_PART.search(p.name) or p.name.startswith("_manifest") or "_manifests" in p.parts)
    )


def differences(warehouse: Path, published: Path) -> dict[str, tuple[int, int]]:
    with connect(published, read_only=True) as con:
        con.execute(f"attach '{warehouse}' as work (read_only)")
        tables = [
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
    return out


def test_citegate_run_converts_a_lake_of_the_earlier_format_in_place(released, tmp_path, dagster_home, capsys):
    warehouse, lake = released
    before = old_files(lake)
    assert "_manifest.json" in before and len([f for f in before if OLD_PART.search(f)]) == 23
    with pytest.raises(lake_module.LakeError, match=r"written by an earlier citegate .*`citegate run`"):
        lake_module.current_files(lake, "citations")
    landing = tmp_path / "landing"
    shutil.copytree(FIXTURES / "release-landing", landing)

    code = main(
        [
            "run",
            "--logs",
            str(landing),
            "--warehouse",
            str(warehouse),
            "--config",
            str(Path(__file__).resolve().parents[1] / "citegate.toml"),
            "--reviews",
            str(tmp_path / "w.reviews"),
            "--labels",
            str(tmp_path / "no-labels"),
            "--quiet",
        ]
    )

    assert code == 0, capsys.readouterr()
    assert old_files(lake) == []  # the manifest, its history and every day file of the earlier format: gone
    assert not (lake / "_manifests").exists()
    published = warehouse.with_name("w.published.duckdb")
    assert differences(warehouse, published) == {}
    with connect(warehouse, read_only=True) as con:
        for spec in lake_module.LAKE_TABLES:
            table = DeltaTable(lake / spec.name)
            assert table.metadata().partition_columns == [spec.column]
            [(rows,)] = con.sql(f"select count(*) from {spec.name}").fetchall()
            assert pl.scan_delta(str(lake / spec.name)).collect().height == rows > 0, spec.name
    with connect(published, read_only=True) as con:
        views = con.sql("select sql from duckdb_views() where not internal").fetchall()
        assert len(views) == len(lake_module.LAKE_TABLES)
        assert not any(OLD_PART.search(part) for (sql,) in views for part in sql.split("'"))
        assert len(con.sql("select * from lake_versions").fetchall()) == len(lake_module.LAKE_TABLES)
    assert lake_module.current_files(lake, "citations")  # a lake of the current format: read, not refused


def test_the_earlier_formats_files_stay_until_a_published_file_names_the_delta_files(released, tmp_path, monkeypatch):
    """A conversion that crashes before its published file is renamed into place leaves the earlier format whole
    (its manifest and every file it names, byte for byte); the next publish finishes the conversion."""
    warehouse, lake = released
    with connect(warehouse) as con:
        ensure_schema(con)  # as every run's first step: the moved warehouse's text folder found again
    published = tmp_path / "w.published.duckdb"
    kept = {f: (lake / f).read_bytes() for f in old_files(lake)}
    real_replace = publish_module.os.replace

    def crash_on_publish(src, dst):
        if Path(dst) == published:
            raise OSError("disk gone")
        return real_replace(src, dst)

    monkeypatch.setattr(publish_module.os, "replace", crash_on_publish)
    with pytest.raises(OSError, match="disk gone"):
        publish_lake(warehouse, published, lake)
    monkeypatch.undo()

    assert {f: (lake / f).read_bytes() for f in old_files(lake)} == kept
    assert (lake / "citations" / "_delta_log").is_dir()  # the Delta tables were written; nothing names them yet

    facts = publish_lake(warehouse, published, lake)

    assert facts["upgraded"] == len(kept)
    assert old_files(lake) == []
    assert differences(warehouse, published) == {}
