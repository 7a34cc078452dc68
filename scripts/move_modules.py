"""Move citegate_assets/lib/ from one flat folder into packages by stage (docs/architecture.md), in one command.

    python scripts/move_modules.py            # move, rewrite every reference, then ruff (format, import order)
    python scripts/move_modules.py --check    # say what would be done; change nothing; exit 1 if anything would

MAPPING below names every module (or package folder) of lib/ and where it goes. The script:
  1. refuses, changing nothing, when a mapped source is missing while its target is missing too (renamed or
     deleted on another branch), when a source and its target both exist, or when lib/ holds a module that
     MAPPING does not name (added on another branch): the message names each one, to be added to MAPPING;
  2. turns every relative import under citegate_assets/ into an absolute one (a moved module's `.x` would
     otherwise name a sibling it no longer has);
  3. rewrites every reference to a moved module in citegate_assets/, tests/, benchmarks/, scripts/, docs/ and the
     project files (pyproject.toml, Makefile, mkdocs.yml, workspace.yaml, dagster configs, *.md): dotted names in
     imports and strings (`monkeypatch.setattr("citegate_assets.lib.x.f", ...)`, mock targets),
     `from citegate_assets.lib import x`, and paths such as `lib/x.py` or `lib/judge/`;
  4. `git mv`s each module that is still at its old place, and gives each new package an __init__.py.
It is idempotent: a module already at its new place is left alone, and a second run changes nothing. A package
named like a module it replaces (lib/ingest.py -> lib/ingest/) is told apart by whether lib/ingest.py still exists.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "citegate_assets"
LIB = f"{PACKAGE}.lib"

# new package -> (docstring of its __init__.py, {old module under lib: new name inside the package})
# A name ending in "/" is a package folder moved whole (its modules and data files keep their names).
LAYOUT: dict[str, tuple[str, dict[str, str]]] = {
    "core": (
        "The shared bottom: paths, SQL files, the config fields' checks, surfaces, terminal text, processes, locks.",
        {
            "appendlog": "appendlog",
            "config_fields": "config_fields",
            "durable": "durable",
            "folders": "folders",
            "lines": "lines",
            "private": "private",
            "processes": "processes",
            "reasons": "reasons",
            "runlock": "runlock",
            "settings": "paths",
            "sql": "sql",
            "surfaces": "surfaces",
            "terminal": "terminal",
            "timestamps": "timestamps",
            "tokens": "tokens",
        },
    ),
    "storage": (
        "Where the data lives: the DuckDB warehouse, prompt text files, the lake (Delta tables), the published copy.",
        {
            "file_rewrite": "file_rewrite",
            "lake": "lake",
            "lake_store": "lake_store",
            "publish": "publish",
            "text_files": "text_files",
            "text_store": "text_store",
            "warehouse": "warehouse",
        },
    ),
    "ingest": (
        "The ingest stage: landing files and trace formats read, validated, normalized and appended.",
        {
            "adapters/": "adapters/",
            "anchors": "anchors",
            "batch": "batch",
            "chunk_fit": "chunk_fit",
            "containers": "containers",
            "doctor": "doctor",
            "ingest": "stream",
            "ingest_settings": "settings",
            "ingest_workers": "workers",
            "known_requests": "known_requests",
            "landing": "landing",
            "layout": "layout",
            "ledger": "ledger",
            "locate": "locate",
            "markers": "markers",
            "normalize": "normalize",
            "normalize_plain": "normalize_plain",
            "pdf_text": "pdf_text",
            "profiles": "profiles",
            "records": "records",
            "rejects_view": "rejects_view",
            "sentences": "sentences",
            "shard_collect": "shard_collect",
            "shard_staging": "shard_staging",
            "shared_lines": "shared_lines",
            "shards": "shards",
            "trace_partners": "trace_partners",
        },
    ),
    "provenance": (
        "The provenance gate: each citation checked against the prompt that was really sent.",
        {
            "passages": "passages",
            "prompt_integrity": "prompt_integrity",
            "provenance": "gate",
        },
    ),
    "support": (
        "The support gate: the sample, the judges (judge/), the cache, the cascade and the numeric check.",
        {
            "agreement": "agreement",
            "cascade": "cascade",
            "judge/": "judge/",
            "numbers": "numbers",
            "policies": "policies",
            "sampling": "sampling",
            "support": "judging",
        },
    ),
    "calibration": (
        "Calibration: hand labels and own labels, and the judge's false pass and false fail rates against them.",
        {
            "calibration": "rates",
            "label_log": "label_log",
            "labels": "labels",
            "own_labels": "own_labels",
        },
    ),
    "review": (
        "The review queue: best evidence, the reviewers' decisions log, the queue as text.",
        {
            "best_evidence": "best_evidence",
            "queue_view": "queue_view",
            "reviews": "reviews",
        },
    ),
    "metrics": (
        "Weekly metrics: the preregistered definitions, their chart and their text view.",
        {
            "chart": "chart",
            "metrics": "preregistered",
            "metrics_view": "metrics_view",
        },
    ),
    "retention": (
        "Retention and erasure: old prompt text dropped, a request forgotten everywhere it was written.",
        {
            "forget": "forget",
            "retention": "drop_text",
        },
    ),
    "": (
        "",
        {
            "config": "config",
            "estimate": "estimate",
            "loggen/": "loggen/",
            "report_view": "report_view",
            "reporting": "reporting",
        },
    ),
}
# modules split out of a moved one after the move, so they have no old place: known to the checks, never moved
SPLIT_AFTER_MOVE: dict[str, tuple[str, ...]] = {
    "ingest": ("citation_rows", "frames", "prompt_sections", "retrievals", "run_batches", "trace_reading", "writer"),
}

PROJECT_FILES = (
    "pyproject.toml",
    "Makefile",
    "mkdocs.yml",
    "workspace.yaml",
    "dagster_home/dagster.yaml",
    "citegate_assets/dagster.yaml",
    "README.md",
    "BENCHMARKS.md",
    "RELIABILITY.md",
)
TREES = ("citegate_assets", "tests", "benchmarks", "scripts", "docs", "deploy", ".ci")
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".ini", ".sh", ".json", ".html"}
THIS_SCRIPT = Path(__file__).resolve()
# never rewritten: this script's mapping, and the test whose fixtures spell the old names on purpose
KEEP_AS_WRITTEN = ("scripts/move_modules.py", "tests/test_move_modules.py")
LINE_LIMIT = 120  # pyproject.toml [tool.ruff] line-length


class Refused(Exception):
    pass


def _dotted(package: str, name: str) -> str:
    return ".".join(p for p in (LIB, package, name.rstrip("/")) if p)


def mapping() -> dict[str, str]:
    """Old dotted module (or package) -> new dotted module (or package)."""
    out = {}
    for package, (_, modules) in LAYOUT.items():
        for old, new in modules.items():
            out[_dotted("", old)] = _dotted(package, new)
    return out


def new_packages() -> dict[str, str]:
    """Dotted name of each new package -> its docstring."""
    return {_dotted(p, ""): doc for p, (doc, _) in LAYOUT.items() if p}


def _path(root: Path, dotted: str, folder: bool) -> Path:
    parts = dotted.split(".")
    return root.joinpath(*parts) if folder else root.joinpath(*parts[:-1], parts[-1] + ".py")


def _is_folder(old: str) -> bool:
    return any(_dotted("", o) == old and o.endswith("/") for _, m in LAYOUT.values() for o in m)


def state(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(to move, already moved): old -> new. Raises Refused for a missing source, a double, an unmapped module."""
    problems, to_move, moved = [], {}, {}
    for old, new in mapping().items():
        folder = _is_folder(old)
        src, dst = _path(root, old, folder), _path(root, new, folder)
        if old == new and src.exists():
            continue  # stays where it is
        if src.exists() and dst.exists():
            problems.append(f"both {src.relative_to(root)} and {dst.relative_to(root)} exist: merge them by hand")
        elif src.exists():
            to_move[old] = new
        elif dst.exists():
            moved[old] = new
        else:
            problems.append(
                f"mapped source module {src.relative_to(root)} is missing, and so is its target "
                f"{dst.relative_to(root)} (renamed or deleted on another branch?): update MAPPING in {THIS_SCRIPT.name}"
            )
    known = set()
    for old, new in mapping().items():
        folder = _is_folder(old)
        for dotted in (old, new):
            p = _path(root, dotted, folder)
            known.add(p)
    known |= {_path(root, pkg, True) / "__init__.py" for pkg in new_packages()}
    known |= {_path(root, _dotted(pkg, name), False) for pkg, names in SPLIT_AFTER_MOVE.items() for name in names}
    known.add(root / PACKAGE / "lib" / "__init__.py")
    unmapped = []
    for path in sorted((root / PACKAGE / "lib").rglob("*.py")):
        if path in known or any(k in path.parents for k in known if k.suffix != ".py"):
            continue
        unmapped.append(str(path.relative_to(root)))
    if unmapped:
        problems.append(
            "lib/ holds modules MAPPING does not name (added on another branch?): "
            + ", ".join(unmapped)
            + f": add each to LAYOUT in {THIS_SCRIPT.name}"
        )
    if problems:
        raise Refused("\n".join(problems))
    return to_move, moved


def applied(root: Path = ROOT) -> bool:
    """True when every module of MAPPING is at its new place (tests read this to switch on the layout checks)."""
    try:
        to_move, _ = state(root)
    except Refused:
        return False
    return not to_move


# ------------------------------------------------------------------------------------------------- rewriting


def _module_of(root: Path, path: Path) -> tuple[str, bool]:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def absolute_imports(root: Path, text: str, path: Path) -> str:
    """Every `from .x import y` of a module under citegate_assets/ as `from citegate_assets....x import y`."""
    if "from ." not in text:
        return text
    module, is_package = _module_of(root, path)
    lines = text.splitlines(keepends=True)
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            i = node.lineno - 1
            head = re.compile(r"from\s+\.+" + re.escape(node.module or "") + r"\s+import\b")
            lines[i] = head.sub(f"from {target} import", lines[i], count=1)
    return "".join(lines)


class Resolver:
    """Rewrites references to moved modules; a name that is both an old module and a new package (lib.ingest) is
    the old module while its old file exists, the new package once it is gone."""

    def __init__(self, root: Path) -> None:
        self.map = mapping()
        self.live = {old for old in self.map if _path(root, old, _is_folder(old)).exists()}
        self.packages = set(new_packages())
        self.olds = sorted(self.map, key=len, reverse=True)

    def _old_meaning(self, old: str) -> bool:
        return old not in self.packages or old in self.live

    def dotted(self, name: str) -> str:
        for old in self.olds:
            if (name == old or name.startswith(old + ".")) and self._old_meaning(old):
                return self.map[old] + name[len(old) :]
        return name

    def from_lib_import(self, match: re.Match[str]) -> str:
        before, names = match.group("before"), match.group("names")
        groups: dict[str, list[str]] = {}
        for item in names.split(","):
            parts = item.split()
            name, alias = parts[0], (parts[2] if len(parts) == 3 else None)
            old = f"{LIB}.{name}"
            if old in self.map and self._old_meaning(old):
                parent, _, new_name = self.map[old].rpartition(".")
                if new_name != name and alias is None:
                    alias = name
                groups.setdefault(parent, []).append(new_name + (f" as {alias}" if alias else ""))
            else:
                groups.setdefault(LIB, []).append(name + (f" as {alias}" if alias else ""))
        statements = [f"from {parent} import {', '.join(items)}" for parent, items in groups.items()]
        # in code, one statement a line; inside a string (code run by a subprocess), on one line
        return before + ("; " if before.endswith(("'", '"')) else "\n" + before).join(statements)

    def paths(self, text: str) -> str:
        for old, new in self.map.items():
            if not self._old_meaning(old):
                continue
            o, n = old[len(LIB) + 1 :].replace(".", "/"), new[len(LIB) + 1 :].replace(".", "/")
            if _is_folder(old):
                text = re.sub(rf"(?<![\w/.-])((?:{PACKAGE}/)?lib/){re.escape(o)}(?=/)", rf"\g<1>{n}", text)
            else:
                text = re.sub(rf"(?<![\w/.-])((?:{PACKAGE}/)?lib/){re.escape(o)}\.py\b", rf"\g<1>{n}.py", text)
        return text


DOTTED = re.compile(re.escape(LIB) + r"(?:\.[A-Za-z_]\w*)+")
FROM_LIB_IMPORT = re.compile(
    r"(?P<before>^[ \t]*|[\"'])from " + re.escape(LIB) + r" import (?P<names>\w+(?: as \w+)?(?:, *\w+(?: as \w+)?)*)",
    re.M,
)


def rewrite(resolver: Resolver, text: str) -> str:
    if f"from {LIB} import (" in text:
        raise Refused(f"`from {LIB} import (...)` spans lines: write it on one line first")
    # dotted names first: the lines `from citegate_assets.lib import x` becomes are already in the new layout
    text = DOTTED.sub(lambda m: resolver.dotted(m.group(0)), text)
    text = FROM_LIB_IMPORT.sub(resolver.from_lib_import, text)
    return resolver.paths(text)


def _prose_lines(text: str) -> set[int]:
    """Line numbers (1-based) inside a string that is a statement of its own (a docstring)."""
    lines = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _cut(line: str, room: int) -> tuple[str, str] | None:
    """line split at its last space within room, never inside its leading whitespace; None when there is none."""
    indent = len(line) - len(line.lstrip())
    at = line.rfind(" ", indent + 1, room + 1)
    if at <= indent:
        return None
    return line[:at].rstrip(), line[at + 1 :]


def rewrap(text: str, before: str, limit: int = LINE_LIMIT) -> tuple[str, list[int]]:
    """The lines the rewrite made longer than limit, wrapped where they are a comment or a docstring's prose:
    (new text, numbers of the lines still too long). Code is never changed here."""
    if all(len(line) <= limit for line in text.splitlines()):
        return text, []
    long_before = {line for line in before.splitlines() if len(line) > limit}
    prose = _prose_lines(text)
    out: list[str] = []
    left: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        while len(line) > limit and line not in long_before:
            indent = line[: len(line) - len(line.lstrip())]
            comment = line.lstrip().startswith("#")
            if comment or number in prose:
                cut = _cut(line, limit)
                if cut is None:
                    break
                out.append(cut[0])
                line = indent + ("# " if comment else "") + cut[1]
            elif "  # " in line and len(line.split("  # ", 1)[0]) <= limit:
                code, remark = line.split("  # ", 1)
                out.append(f"{indent}# {remark}")  # the comment goes above its code
                line = code
            else:
                break
        if len(line) > limit and line not in long_before:
            left.append(len(out) + 1)
        out.append(line)
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), left


def text_files(root: Path) -> list[Path]:
    files = [root / f for f in PROJECT_FILES if (root / f).is_file()]
    for tree in TREES:
        for path in sorted((root / tree).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and str(path.relative_to(root)) not in KEEP_AS_WRITTEN:
                if not any(part.startswith(".venv") or part == "__pycache__" for part in path.parts):
                    files.append(path)
    return files


def plan(root: Path) -> tuple[dict[str, str], dict[Path, str]]:
    """(modules to move, new text of each file to change)."""
    to_move, _ = state(root)
    resolver = Resolver(root)
    changes = {}
    for path in text_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = text
        if path.suffix == ".py" and path.is_relative_to(root / PACKAGE):
            new = absolute_imports(root, new, path)
        new = rewrite(resolver, new)
        if path.suffix == ".py" and new != text:
            new, _ = rewrap(new, text)
        if new != text:
            changes[path] = new
    return to_move, changes


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True)


def apply(root: Path, to_move: dict[str, str], changes: dict[Path, str]) -> None:
    for path, text in changes.items():
        path.write_text(text, encoding="utf-8")
    for package, doc in new_packages().items():
        init = _path(root, package, True) / "__init__.py"
        if not init.exists():
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(f'"""{doc}"""\n', encoding="utf-8")
            git(root, "add", str(init.relative_to(root)))
    for old, new in to_move.items():
        folder = _is_folder(old)
        src, dst = _path(root, old, folder), _path(root, new, folder)
        dst.parent.mkdir(parents=True, exist_ok=True)
        git(root, "mv", str(src.relative_to(root)), str(dst.relative_to(root)))


def tidy(root: Path) -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        print("ruff not found: run `ruff check --fix --select I` and `ruff format` yourself")
        return
    trees = ["citegate_assets", "tests", "benchmarks", "scripts"]
    subprocess.run([ruff, "check", "--fix", "--select", "I", "-q", *trees], cwd=root)
    subprocess.run([ruff, "format", "-q", *trees], cwd=root, check=True)
    left = subprocess.run(
        [ruff, "check", "--output-format", "concise", *trees], cwd=root, capture_output=True, text=True
    )
    if left.returncode:
        print("ruff still finds these (a string in code made longer): fix them by hand\n" + left.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="say what would be done, change nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project to change (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        to_move, changes = plan(root)
    except Refused as exc:
        print(f"move_modules: refused, nothing changed:\n{exc}", file=sys.stderr)
        return 2
    for old, new in to_move.items():
        print(f"move {old} -> {new}")
    for path in changes:
        print(f"rewrite {path.relative_to(root)}")
    if not to_move and not changes:
        print("move_modules: the layout is in place; nothing to do")
        return 0
    if args.check:
        return 1
    apply(root, to_move, changes)
    tidy(root)
    print(f"move_modules: {len(to_move)} moved, {len(changes)} files rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
