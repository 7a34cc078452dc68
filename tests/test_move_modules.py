"""scripts/move_modules.py on a small project of its own (a git repository in tmp_path holding every module the
mapping names, empty but for the references under test): what it moves, what it rewrites, that a second run
changes nothing, and that it refuses, changing nothing, when lib/ and the mapping disagree."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("move_modules", ROOT / "scripts" / "move_modules.py")
    assert spec and spec.loader
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


MOVE = _script()

STREAM = '''"""Reads the landing (lib/ingest.py, beside lib/adapters/base.py)."""

from .config import Config
from .warehouse import connect
from . import lines


def run(config: Config) -> None:
    connect(config)
'''
TEST = """from citegate_assets.lib import ingest as ingest_module
from citegate_assets.lib import settings as where, warehouse
from citegate_assets.lib.ingest import run
from citegate_assets.lib.judge.heuristic import HeuristicJudge


def test_x(monkeypatch):
    monkeypatch.setattr("citegate_assets.lib.ingest.connect", None)
    monkeypatch.setattr("citegate_assets.lib.warehouse.connect", None)
    code = "from citegate_assets.lib import ingest_workers\\n"
"""


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    lib = root / "citegate_assets" / "lib"
    for old in MOVE.mapping():
        path = MOVE._path(root, old, MOVE._is_folder(old))
        if MOVE._is_folder(old):
            path.mkdir(parents=True, exist_ok=True)
            (path / "__init__.py").write_text("")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    (root / "citegate_assets" / "__init__.py").write_text("")
    (lib / "__init__.py").write_text("")
    (lib / "judge" / "weights.json").write_text("{}")
    (lib / "judge" / "heuristic.py").write_text("class HeuristicJudge: ...\n")
    (lib / "ingest.py").write_text(STREAM)
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text(TEST)
    (root / "pyproject.toml").write_text('citegate_assets = ["lib/judge/*.json"]\n')
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("See lib/warehouse.py and citegate_assets/lib/adapters/otlp.py.\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    return root


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts and "__pycache__" not in p.parts
    }


def test_moves_and_rewrites_every_kind_of_reference(tmp_path, monkeypatch):
    root = _project(tmp_path)
    monkeypatch.setattr(MOVE, "tidy", lambda root: None)  # ruff is the lint step's; the rewrite is what is tested
    assert MOVE.main(["--root", str(root)]) == 0
    tree = _tree(root)
    assert "citegate_assets/lib/ingest.py" not in tree
    assert tree["citegate_assets/lib/ingest/stream.py"] == (
        STREAM.replace("lib/ingest.py", "lib/ingest/stream.py")
        .replace("lib/adapters/base.py", "lib/ingest/adapters/base.py")
        .replace("from .config import", "from citegate_assets.lib.config import")
        .replace("from .warehouse import", "from citegate_assets.lib.storage.warehouse import")
        .replace("from . import lines", "from citegate_assets.lib.core import lines")
    )
    assert tree["tests/test_x.py"] == (
        "from citegate_assets.lib.ingest import stream as ingest_module\n"
        "from citegate_assets.lib.core import paths as where\n"
        "from citegate_assets.lib.storage import warehouse\n"
        "from citegate_assets.lib.ingest.stream import run\n"
        "from citegate_assets.lib.support.judge.heuristic import HeuristicJudge\n"
        "\n\n"
        "def test_x(monkeypatch):\n"
        '    monkeypatch.setattr("citegate_assets.lib.ingest.stream.connect", None)\n'
        '    monkeypatch.setattr("citegate_assets.lib.storage.warehouse.connect", None)\n'
        '    code = "from citegate_assets.lib.ingest import workers as ingest_workers\\n"\n'
    )
    assert tree["pyproject.toml"] == 'citegate_assets = ["lib/support/judge/*.json"]\n'
    assert tree["citegate_assets/lib/support/judge/weights.json"] == "{}"
    assert tree["docs/a.md"] == ("See lib/storage/warehouse.py and citegate_assets/lib/ingest/adapters/otlp.py.\n")
    assert tree["citegate_assets/lib/ingest/__init__.py"].startswith('"""The ingest stage')
    assert MOVE.applied(root)
    # a second run finds the layout in place and changes nothing
    assert MOVE.main(["--root", str(root)]) == 0
    assert _tree(root) == tree


def test_refuses_a_module_the_mapping_does_not_name(tmp_path, capsys):
    root = _project(tmp_path)
    (root / "citegate_assets" / "lib" / "brand_new.py").write_text("")
    before = _tree(root)
    assert MOVE.main(["--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "refused, nothing changed" in err
    assert (
        "lib/ holds modules MAPPING does not name (added on another branch?): citegate_assets/lib/brand_new.py" in err
    )
    assert _tree(root) == before


def test_refuses_a_mapped_module_that_is_gone(tmp_path, capsys):
    root = _project(tmp_path)
    (root / "citegate_assets" / "lib" / "ledger.py").unlink()
    before = _tree(root)
    assert MOVE.main(["--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert "mapped source module citegate_assets/lib/ledger.py is missing" in err
    assert _tree(root) == before


@pytest.mark.parametrize("line", ["# see lib/judge/lexical.py and lib/judge/heuristic.py" + " word" * 14])
def test_a_comment_pushed_over_the_line_limit_is_wrapped(line):
    before = f"x = 1\n{line}\n"
    after = MOVE.rewrite(MOVE.Resolver(Path("/nonexistent")), before)
    wrapped, left = MOVE.rewrap(after, before)
    assert left == []
    assert all(len(row) <= MOVE.LINE_LIMIT for row in wrapped.splitlines())
    rows = wrapped.splitlines()
    assert rows[0] == "x = 1"
    assert " ".join([rows[1]] + [row.removeprefix("# ") for row in rows[2:]]) == after.splitlines()[1]
