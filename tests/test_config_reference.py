"""docs/configuration-reference.md is generated from the config schema (scripts/config_reference.py) and fails here
when it is stale, naming the command that regenerates it; every key of the schema carries its type and meaning."""

from __future__ import annotations

import importlib.util
from dataclasses import fields
from pathlib import Path

import pytest

from citegate_assets.lib import config
from citegate_assets.lib.ingest.profiles import Profile

PROJECT = Path(__file__).resolve().parents[1]


def generator():
    spec = importlib.util.spec_from_file_location("config_reference", PROJECT / "scripts" / "config_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SECTIONS = [config.SurfacePolicy, config.SecondaryJudgeConfig, *config._SECTIONS.values()]


def test_the_page_is_what_the_schema_generates():
    script = generator()
    page = (PROJECT / "docs" / "configuration-reference.md").read_text(encoding="utf-8")
    assert page == script.render(), f"docs/configuration-reference.md is stale: run {script.COMMAND}"


def test_check_mode_names_the_command_when_the_page_is_stale(tmp_path, monkeypatch, capsys):
    script = generator()
    stale = tmp_path / "configuration-reference.md"
    stale.write_text(script.render().replace("| `concurrency` |", "| `concurrency_old` |"), encoding="utf-8")
    monkeypatch.setattr(script, "PAGE", stale)
    assert script.main(["--check"]) == 1
    assert "python scripts/config_reference.py" in capsys.readouterr().err
    assert script.main([]) == 0 and script.main(["--check"]) == 0


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_every_key_of_the_schema_has_a_type_a_meaning_and_a_row(cls):
    page = generator().render()
    for f in fields(cls):
        if "check" not in f.metadata:
            continue
        assert f.metadata["doc"].strip(), f"{cls.__name__}.{f.name} has no meaning"
        assert getattr(f.metadata["check"], "expected", ""), f"{cls.__name__}.{f.name}'s check says no type"
        assert f"| `{f.name}` |" in page


def test_every_section_and_every_profile_key_is_on_the_page():
    page = generator().render()
    for name in ["surfaces.NAME", "templates.NAME", "judge.secondary", *config._SECTIONS]:
        assert f"\n## [{name}]\n" in page
    for f in fields(Profile):
        if f.name not in ("name", "_compiled"):
            assert f"| `{f.name}` |" in page
