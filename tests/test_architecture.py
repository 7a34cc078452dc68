"""The import rule of docs/architecture.md: the gates in citegate_assets/lib/ never import dagster.

They test in milliseconds and run inside a caller's process (the call-time guard) because of it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "citegate_assets" / "lib"
# the Dagster side of the package: lib may use none of it
DAGSTER_SIDE = ("dagster", "dagster_webserver", "citegate_assets.defs", "citegate_assets.definitions")
DAGSTER_SIDE_MODULES = ("citegate_assets.pipeline", "citegate_assets.cli")


def _lib_modules() -> list[str]:
    names = []
    for path in sorted(LIB.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _is_dagster_side(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in DAGSTER_SIDE) or module in DAGSTER_SIDE_MODULES


def test_no_lib_module_names_dagster_in_an_import_statement():
    offending = [
        f"{path.relative_to(ROOT)}:{line}: import {module}"
        for path in sorted(LIB.rglob("*.py"))
        for line, module in _imports(path)
        if _is_dagster_side(module)
    ]
    assert offending == []


def test_importing_every_lib_module_loads_no_dagster():
    modules = _lib_modules()
    assert len(modules) > 30  # the walk found the package
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in ('dagster', 'dagster_webserver')}))\n"
        "side = ('citegate_assets.defs', 'citegate_assets.definitions')\n"
        "print(sorted(m for m in sys.modules if m.startswith(side)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "[]"]


def test_the_rule_catches_a_violation(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nimport dagster as dg\nfrom citegate_assets.defs.ingest import prompt_log\n")
    assert [m for _, m in _imports(bad) if _is_dagster_side(m)] == ["dagster", "citegate_assets.defs.ingest"]


def test_sql_scripts_split_at_semicolons_outside_quotes_and_comments():
    from citegate_assets.lib.warehouse import split_statements

    script = (
        "-- a header; with a semicolon\n"
        "create table t (a varchar); -- trailing; comment\n"
        "insert into t values ('x;y'), ('it''s -- not a comment');\n"
        'select "odd;name" from t\n'
    )
    assert split_statements(script) == (
        "create table t (a varchar)",
        "insert into t values ('x;y'), ('it''s -- not a comment')",
        'select "odd;name" from t',
    )
