"""One source of truth for paths: flag > environment > config file > default, for every setting, and the
CLI, the resource and the pipeline all using it (a folder's own citegate.toml, the reviews log the next
run reads, readers that open only the published copy, calibrate and demo honouring CITEGATE_WAREHOUSE)."""

import json
import re
import shutil
import tomllib
from pathlib import Path

import duckdb
import pytest

from citegate_assets.cli import main
from citegate_assets.defs.resources import (
    CitegateConfigResource,
    LakeResource,
    LandingResource,
    ReviewFilesResource,
    WarehouseResource,
    run_config_for,
)
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.core import paths as where
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.warehouse import connect

from .helpers import scenario_record, write_jsonl

PROJECT = Path(__file__).resolve().parents[1]
ALL_ENV = tuple(where.ENV.values())


@pytest.fixture
def clean_env(monkeypatch):
    for name in ALL_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CITEGATE_REVIEWER", "tester")


# ------------------------------------------------------------------------------- the precedence


def _folder(tmp_path: Path, config_keys: bool) -> Path:
    cwd = tmp_path / "cwd"
    (cwd / "conf").mkdir(parents=True)
    body = "[queue]\nreviews = 'cfg-reviews'\n[calibration]\nlabels = 'cfg-labels'\n[storage]\nlake = 'cfg-lake'\n"
    body = body if config_keys else ""
    (cwd / "conf" / "c.toml").write_text(body)
    (cwd / "citegate.toml").write_text(body)
    (cwd / "from-flag").write_text(body)  # a config file too, for the config setting itself
    (tmp_path / "from-env").write_text(body)
    return cwd


@pytest.mark.parametrize("name", where.NAMES)
def test_flag_beats_env_beats_config_beats_default(name, tmp_path):
    cwd = _folder(tmp_path, config_keys=True)
    env = {where.ENV[name]: str(tmp_path / "from-env")}
    flag = {name: "from-flag"}

    s = where.resolve(**flag, env=env, cwd=cwd)
    assert getattr(s, name) == (cwd / "from-flag").resolve() and s.kind(name) == "flag"
    assert f"(from {where.FLAGS[name]})" in "\n".join(s.describe())

    s = where.resolve(env=env, cwd=cwd)
    assert getattr(s, name) == (tmp_path / "from-env").resolve() and s.kind(name) == "env"
    assert f"(from ${where.ENV[name]})" in "\n".join(s.describe())

    s = where.resolve(env={}, cwd=cwd)
    if name in where.CONFIG_KEYS:  # the config file's value, relative to the config file
        s = where.resolve(config="conf/c.toml", env={}, cwd=cwd)
        assert getattr(s, name) == (cwd / "conf" / f"cfg-{name}").resolve() and s.kind(name) == "config"
        section, key = where.CONFIG_KEYS[name]
        assert f"(from c.toml [{section}].{key})" in "\n".join(s.describe())
    elif name == "config":  # ./citegate.toml of the current directory
        assert s.config == (cwd / "citegate.toml").resolve() and s.kind("config") == "default"

    bare = tmp_path / "bare"
    bare.mkdir()
    s = where.resolve(env={}, cwd=bare)
    expected = {
        "config": None,
        "landing": bare / "data" / "landing",
        "warehouse": bare / "data" / "warehouse.duckdb",
        "published": bare / "data" / "warehouse.published.duckdb",
        "reviews": bare / "data" / "warehouse.reviews",
        "labels": bare / "data" / "warehouse.labels",
        "dagster_home": bare / "data" / "dagster_home",
        "lake": bare / "data" / "warehouse.lake",
    }[name]
    assert getattr(s, name) == (expected.resolve() if expected else None) and s.kind(name) == "default"


def test_reviews_labels_published_and_dagster_home_follow_the_warehouse(tmp_path):
    s = where.resolve(warehouse="elsewhere/audit.duckdb", env={}, cwd=tmp_path)
    base = (tmp_path / "elsewhere").resolve()
    assert (s.published, s.reviews, s.labels, s.dagster_home) == (
        base / "audit.published.duckdb",
        base / "audit.reviews",
        base / "audit.labels",
        base / "dagster_home",
    )
    s = where.resolve(env={"CITEGATE_WAREHOUSE": str(tmp_path / "w2.duckdb")}, cwd=tmp_path)
    assert (
        s.reviews == (tmp_path / "w2.reviews").resolve() and s.published == (tmp_path / "w2.published.duckdb").resolve()
    )


def test_builtin_config_sentinel_and_missing_or_broken_config(tmp_path):
    (tmp_path / "citegate.toml").write_text("")
    assert where.resolve(config=where.BUILTIN_CONFIG, env={}, cwd=tmp_path).config is None
    with pytest.raises(where.SettingsError, match="config file not found"):
        where.resolve(config="nope.toml", env={}, cwd=tmp_path)
    (tmp_path / "bad.toml").write_text("[queue\n")
    with pytest.raises(where.SettingsError, match="bad.toml"):
        where.resolve(env={"CITEGATE_CONFIG": str(tmp_path / "bad.toml")}, cwd=tmp_path)


def _resources(run_config: dict | None = None):
    """The resources as a run builds them from its run config (empty: the nightly schedule's runs)."""
    config = {key: value["config"] for key, value in (run_config or {}).items()}
    return (
        WarehouseResource(**config.get("warehouse", {})),
        LandingResource(**config.get("landing", {})),
        CitegateConfigResource(**config.get("citegate_config", {})),
        ReviewFilesResource(**config.get("review_files", {})),
        LakeResource(**config.get("lake", {})),
    )


def test_resource_uses_exactly_what_was_resolved(tmp_path, clean_env, monkeypatch):
    s = where.resolve(
        warehouse=tmp_path / "w.duckdb", landing=tmp_path / "in", config=where.BUILTIN_CONFIG, cwd=tmp_path
    )
    # the environment changes after the CLI resolved: the run still uses what was printed
    for name in ALL_ENV:
        monkeypatch.setenv(name, str(tmp_path / "other" / name))
    monkeypatch.setenv("CITEGATE_CONFIG", str(tmp_path / "missing.toml"))
    warehouse, landing, config, review_files, lake = _resources(run_config_for(s, final_read=True))
    assert warehouse.database_path() == s.warehouse and warehouse.published_path() == s.published
    assert lake.root(warehouse, config) == s.lake
    assert landing.path() == s.landing and landing.final_read
    assert config.config_path() is None and config.config().path is None
    assert review_files.reviews_path(warehouse, config) == s.reviews
    assert review_files.labels_path(warehouse, config) == s.labels


def test_the_nightly_resource_resolves_from_the_environment(tmp_path, clean_env, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CITEGATE_WAREHOUSE", "w/n.duckdb")
    monkeypatch.setenv("CITEGATE_PUBLISHED", str(tmp_path / "pub.duckdb"))
    warehouse, landing, config, review_files, lake = _resources()
    assert warehouse.database_path() == (tmp_path / "w" / "n.duckdb").resolve()
    assert lake.root(warehouse, config) == (tmp_path / "w" / "n.lake").resolve()
    assert warehouse.published_path() == (tmp_path / "pub.duckdb").resolve()
    assert review_files.reviews_path(warehouse, config) == (tmp_path / "w" / "n.reviews").resolve()
    assert landing.path() == (tmp_path / "data" / "landing").resolve() and not landing.final_read


@pytest.mark.parametrize("name", ["landing", "warehouse", "published", "reviews", "labels", "config"])
def test_each_resource_resolves_like_the_cli(name, tmp_path, clean_env, monkeypatch):
    """Whatever mix of environment variables and citegate.toml is in force, the unconfigured resources (the
    nightly schedule's runs) resolve every path the CLI would print: one precedence, lib/core/paths.py."""
    cwd = _folder(tmp_path, config_keys=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv(where.ENV[name], str(tmp_path / "from-env"))
    if name == "config":
        monkeypatch.setenv("CITEGATE_CONFIG", "conf/c.toml")  # its reviews and labels count, relative to it
    s = where.resolve()
    warehouse, landing, config, review_files, lake = _resources()
    assert lake.root(warehouse, config) == s.lake
    assert (warehouse.database_path(), warehouse.published_path(), landing.path(), config.config_path()) == (
        s.warehouse,
        s.published,
        s.landing,
        s.config,
    )
    assert review_files.reviews_path(warehouse, config) == s.reviews
    assert review_files.labels_path(warehouse, config) == s.labels


def test_the_demo_from_the_project_folder_calibrates_on_labels_drawn_from_its_logs():
    s = where.resolve(env={}, cwd=PROJECT)
    # the project's file names no labels: `citegate demo` then draws them from its generated logs (cmd_demo)
    assert s.config == PROJECT / "citegate.toml" and s.kind("labels") == "default"
    assert s.labels == PROJECT / "data" / "warehouse.labels"
    assert s.reviews == PROJECT / "data" / "warehouse.reviews"  # the project's file names no reviews folder
    assert len(where.demo_labels().read_text().splitlines()) == 224
    assert where.source_checkout() == PROJECT  # an editable install reads the project's sql/ through the package


def test_my_rag_example_is_identical_everywhere():
    def block(text: str) -> str:
        start = text.index("[templates.my-rag]")
        lines = []
        for line in text[start:].splitlines():
            line = line.removeprefix("# ")
            if not line.strip() or line.startswith(("```", "[surfaces", "#")):
                break
            lines.append(line.split("  #")[0].rstrip())
        return "\n".join(lines)

    sample = block((PROJECT / "docs" / "configuration.md").read_text())
    assert (
        sample
        == block((PROJECT / "docs" / "profiles.md").read_text())
        == block((PROJECT / "citegate.toml").read_text())
    )
    assert "my-rag" in parse_config(tomllib.loads(sample), None).templates


def test_the_sample_config_keeps_the_auto_template_default():
    """The sample in docs/configuration.md names no template for the default surface, so it fits what `auto` fits."""
    page = (PROJECT / "docs" / "configuration.md").read_text()
    [sample] = re.findall(r"```toml\n(.*?)```", page, re.DOTALL)
    cfg = parse_config(tomllib.loads(sample), None)
    assert cfg.surface("any-surface-not-listed").template == "auto"
    assert "template" not in tomllib.loads(sample)["surfaces"]["default"]


# ------------------------------------------------------------------------------- end to end


def _published_rows(path: Path, sql: str):
    with connect(path, read_only=True) as con:
        return con.sql(sql).fetchall()


def test_a_folder_with_its_own_citegate_toml_runs_with_it(tmp_path, clean_env, monkeypatch, capsys):
    """Run from a folder that holds a citegate.toml: the pipeline applies that file (the surface's template
    and stakes), and the Dagster home defaults to one beside the warehouse."""
    folder = tmp_path / "team"
    (folder / "landing").mkdir(parents=True)
    record = scenario_record("anthropic-xml", "text")
    del record["template"]  # the surface's template decides
    write_jsonl(folder / "landing" / "a.jsonl", [record])
    (folder / "citegate.toml").write_text(
        "[surfaces.test-surface]\nstakes = 'off'\ntemplate = 'anthropic-xml'\nowner = 'folder-team'\n"
    )
    monkeypatch.chdir(folder)
    assert main(["run", "--logs", "landing", "--warehouse", "out/wh.duckdb", "--end", "2026-11-02", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"config:       {folder.resolve() / 'citegate.toml'}  (default: ./citegate.toml)" in out
    assert f"dagster home: {folder.resolve() / 'out' / 'dagster_home'}" in out
    wh = folder / "out" / "wh.duckdb"
    assert _published_rows(wh, "select template, profile_status from prompts") == [("anthropic-xml", "ok")]
    assert {w for (w,) in _published_rows(wh, "select distinct why from support_sample")} == {"stakes_off"}
    assert {o for (o,) in _published_rows(wh, "select distinct owner from citation_queue")} == {"folder-team"}
    assert (folder / "out" / "dagster_home" / "dagster.yaml").exists()
    assert (folder / "out" / "wh.published.duckdb").exists()


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One CLI run in an empty folder (no citegate.toml, no variables): landing/ -> wh.duckdb."""
    folder = tmp_path_factory.mktemp("ran")
    with pytest.MonkeyPatch.context() as mp:
        for name in ALL_ENV:
            mp.delenv(name, raising=False)
        mp.chdir(folder)
        generate_logs(folder / "landing", days=1, requests_per_day=40, seed=11)
        assert main(["run", "--logs", "landing", "--warehouse", "wh.duckdb", "--quiet"]) == 0
    assert (folder / "dagster_home" / "dagster.yaml").exists()  # beside the warehouse, not the project's
    return folder


@pytest.fixture
def copy_of(ran, tmp_path, clean_env, monkeypatch):
    folder = tmp_path / "copy"
    shutil.copytree(ran, folder, ignore=shutil.ignore_patterns("dagster_home"))
    monkeypatch.chdir(folder)
    return folder


def test_a_review_is_read_by_the_next_run(copy_of, capsys):
    published = copy_of / "wh.published.duckdb"
    [(cid, status)] = _published_rows(
        published, "select citation_id, status from citation_queue order by citation_id limit 1"
    )
    assert status == "open"
    assert main(["review", cid, "repair", "--warehouse", "wh.duckdb", "--note", "narrow the claim"]) == 0
    assert str(copy_of / "wh.reviews" / "reviews.jsonl") in capsys.readouterr().out
    assert main(["run", "--logs", "landing", "--warehouse", "wh.duckdb", "--quiet"]) == 0
    assert _published_rows(published, f"select status from citation_queue where citation_id = '{cid}'") == [
        ("repaired",)
    ]
    assert _published_rows(published, "select count(*) from review_outcomes") == [(1,)]


def test_readers_honour_citegate_published_and_never_open_the_working_file(copy_of, monkeypatch, capsys, tmp_path):
    moved = tmp_path / "team-share" / "audit.duckdb"
    moved.parent.mkdir()
    shutil.move(copy_of / "wh.published.duckdb", moved)
    monkeypatch.setenv("CITEGATE_PUBLISHED", str(moved))
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(copy_of / "wh.duckdb"))
    opened = []
    real = duckdb.connect
    monkeypatch.setattr(
        duckdb, "connect", lambda path, *a, **k: opened.append(Path(path).resolve()) or real(path, *a, **k)
    )
    [(cid,)] = _published_rows(moved, "select citation_id from citation_queue order by citation_id limit 1")
    opened.clear()
    assert main(["queue", "--limit", "1"]) == 0
    assert main(["queue", "show", cid]) == 0
    assert main(["metrics", "--weeks", "1"]) == 0
    [(surface, week)] = _published_rows(moved, "select surface, week_start from weekly_surface_metrics limit 1")
    opened.clear()
    assert main(["trace", "--metric", "provenance_pass_rate", "--surface", surface, "--week", str(week)]) == 0
    assert main(["review", cid, "accept"]) == 0  # the review command reads the published copy too
    assert set(opened) == {moved.resolve()}
    assert f"reading {moved.resolve()}  (from $CITEGATE_PUBLISHED)" in capsys.readouterr().err

    # no published copy: a clear error, and still no fallback to the working file
    monkeypatch.setenv("CITEGATE_PUBLISHED", str(tmp_path / "none.duckdb"))
    opened.clear()
    for argv in (["queue"], ["metrics"], ["trace", "--metric", "m", "--surface", "s", "--week", "2026-11-02"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "no published copy" in err and "run `citegate run` first" in err
    assert opened == []


def test_demo_and_calibrate_honour_citegate_warehouse(tmp_path, clean_env, monkeypatch, capsys):
    """From an empty folder: the demo writes into $CITEGATE_WAREHOUSE, calibrated on labels drawn from its logs, and
    calibrate recalibrates that same warehouse on the labels it is given."""
    monkeypatch.chdir(tmp_path)
    warehouse = tmp_path / "elsewhere" / "demo.duckdb"
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(warehouse))
    assert main(["demo", "--days", "1", "--requests-per-day", "20"]) == 0
    out = capsys.readouterr().out
    assert f"warehouse:    {warehouse}  (from $CITEGATE_WAREHOUSE)" in out
    drawn = tmp_path / "data" / "demo-labels.jsonl"
    assert f"labels:       {drawn}  (the demo's labels, drawn from its generated logs' truth)" in out
    assert (tmp_path / "data" / "landing").is_dir() and not (tmp_path / "data" / "warehouse.duckdb").exists()
    with connect(warehouse, read_only=True) as con:
        assert con.sql("select count(*) from hand_labels").fetchall() == [(len(drawn.read_text().splitlines()),)]

    labels = tmp_path / "mine.jsonl"
    rows = [json.loads(line) for line in where.demo_labels().read_text().splitlines()[:40]]
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("CITEGATE_LABELS", str(labels))
    assert main(["calibrate"]) == 0
    out, err = capsys.readouterr()
    assert re.search(rf"labels:\s+{re.escape(str(labels))}  \(from \$CITEGATE_LABELS\)", out)
    with connect(warehouse, read_only=True) as con:
        assert con.sql("select count(*) from hand_labels").fetchall() == [(40,)]
    published = warehouse.with_name("demo.published.duckdb")  # readers open only this one: calibrate publishes it
    assert f"published {published}  (default: " in out
    assert " - DEBUG - " not in err and " - INFO - " not in err  # Dagster's console logger: warnings and errors only
    with connect(published, read_only=True) as con:
        assert con.sql("select count(*) from hand_labels").fetchall() == [(40,)]


def test_duckdb_memory_limit_is_sized_from_the_environment(tmp_path, monkeypatch):
    """CITEGATE_DUCKDB_MEMORY_LIMIT sizes DuckDB for a pod's memory (deploy/values.yaml); unset, 4 GB; a value DuckDB
    cannot read is refused, naming the variable, before any warehouse is opened."""
    import pytest

    from citegate_assets.lib.storage.warehouse import MEMORY_LIMIT_ENV, connect

    def limit() -> str:
        with connect(tmp_path / "w.duckdb") as con:
            return con.sql("select current_setting('memory_limit')").fetchall()[0][0]

    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert limit() == "3.7 GiB"  # 4 GB
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1500MiB")
    assert limit() == "1.4 GiB"
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
    with pytest.raises(ValueError, match=f"{MEMORY_LIMIT_ENV}='plenty'"):
        limit()
    assert not (tmp_path / "w.duckdb.wal").exists()
