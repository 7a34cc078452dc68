"""Dagster is imported only by the commands that run it: help, the readers, doctor, import and estimate start without
it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from citegate_assets.lib.storage.warehouse import connect, ensure_schema

TRACE = Path(__file__).parent / "fixtures" / "adapters" / "otlp" / "otlp_attributes.jsonl"

# Runs one command in a fresh interpreter, then says on stderr whether dagster was imported.
RUNNER = """
import sys
from citegate_assets.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
finally:
    print("dagster imported:", "dagster" in sys.modules, file=sys.stderr)
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A small landing folder (with a trace file: doctor converts it with the adapters) and a published copy with
    the schema (empty: the readers still run through); a trace file for `citegate import`."""
    root = tmp_path_factory.mktemp("cli_imports")
    assert _dagster_imported(root, "gen-logs", "--out", "landing", "--days", "1", "--requests-per-day", "5") is False
    shutil.copy(TRACE, root / "landing" / "traces.jsonl")
    shutil.copy(TRACE, root / "traces.jsonl")
    with connect(root / "w.published.duckdb") as con:
        ensure_schema(con)
    return root


def _dagster_imported(cwd, *argv: str) -> bool:
    env = {**os.environ, "CITEGATE_WAREHOUSE": str(cwd / "w.duckdb"), "DAGSTER_HOME": str(cwd / "dagster_home")}
    env.pop("CITEGATE_PUBLISHED", None)
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    found = re.findall(r"^dagster imported: (True|False)$", done.stderr, re.MULTILINE)
    assert found, done.stderr
    return found[-1] == "True"


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        [],
        ["queue", "--help"],
        ["metrics"],
        ["queue"],
        ["queue", "show", "r1#0"],
        ["trace", "--metric", "provenance_pass_rate", "--surface", "s", "--week", "2026-11-02"],
        ["review", "r1#0", "accept", "--reviewer", "t"],
        ["label", "--labeller", "t"],
        ["doctor", "--logs", "landing", "--limit", "5"],
        ["gen-logs", "--out", "more", "--days", "1", "--requests-per-day", "2"],
        ["import", "--from", "otlp", "traces.jsonl", "--out", "imported"],
        ["estimate"],
        ["estimate", "--start", "2026-11-02", "--end", "2026-11-03"],
    ],
    ids=" ".join,
)
def test_readers_and_help_do_not_import_dagster(work, argv):
    assert _dagster_imported(work, *argv) is False


@pytest.mark.parametrize("argv", [["run", "--logs", "nowhere"], ["calibrate", "--labels", "nowhere"]], ids=" ".join)
def test_commands_that_run_dagster_import_it(work, argv):
    assert _dagster_imported(work, *argv) is True  # imported first, before the missing folder is reported


def test_loading_the_definitions_does_not_import_openai():
    """Every day process of `run --workers N` loads the definitions; openai costs about a second there and is needed
    only by a run whose judge is an endpoint (lib/support/judge/factory.py and the Batch API client import it then)."""
    probe = (
        "import sys\n"
        "from citegate_assets.definitions import defs\n"
        "defs().resolve_job_def('nightly_job')\n"
        "print('openai imported:', 'openai' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert "openai imported: False" in done.stdout, done.stdout + done.stderr


def test_the_pipeline_side_does_not_import_the_cli():
    """No import circle cli -> pipeline -> day_runs -> cli: what the CLI and the day processes share
    (hide_dagster_warnings) lives in a module below both."""
    import ast

    package = Path(__file__).resolve().parents[1] / "citegate_assets"
    found = []
    for path in [package / "pipeline.py", package / "day_runs.py", *sorted((package / "defs").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [
                f"{path.name}: {n}" for n in names if n == "citegate_assets.cli" or n.startswith("citegate_assets.cli.")
            ]
    assert found == []
