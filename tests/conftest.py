from pathlib import Path

import pytest

from citegate_assets.lib.config import load_config, parse_config
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

PROJECT = Path(__file__).resolve().parents[1]


@pytest.fixture
def config():
    return parse_config({}, None)


@pytest.fixture
def demo_config():
    return load_config(PROJECT / "citegate.toml")


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "warehouse.duckdb") as c:
        ensure_schema(c)
        yield c


@pytest.fixture
def landing(tmp_path):
    path = tmp_path / "landing"
    path.mkdir()
    return path


@pytest.fixture
def dagster_home(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((PROJECT / "dagster_home" / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home
