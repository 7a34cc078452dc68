"""docs/cli.md is generated from the commands' help and documents every command and every option of every command
(sqlite-utils keeps its docs honest the same way): a stale page fails here with the command that regenerates it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from citegate_assets.cli import citegate
from citegate_assets.cli.reference import render

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "cli.md"
ENTRY = re.compile(r"^- `citegate ([a-z-]+)([^`]*)`", re.MULTILINE)
REGENERATE = "python scripts/cli_docs.py"


def commands() -> dict[str, click.Command]:
    return dict(citegate.commands)


def reference() -> dict[str, str]:
    """Command name -> its synopsis in docs/cli.md's "Commands" section."""
    text = REFERENCE.read_text(encoding="utf-8")
    section = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return {name: synopsis for name, synopsis in ENTRY.findall(section)}


def documented(param: click.Parameter) -> list[str]:
    """How a parameter is written in a synopsis: its flags, its choices (`show`), or its name (CITATION_ID)."""
    if isinstance(param, click.Option):
        return [flag for flag in param.opts if flag.startswith("--")]
    if isinstance(param.type, click.Choice):
        return [str(choice) for choice in param.type.choices]
    return re.findall(r"[\w-]+", param.metavar) if param.metavar else [str(param.name).upper()]


def test_the_reference_is_generated_from_the_commands():
    assert REFERENCE.read_text(encoding="utf-8") == render(citegate), f"docs/cli.md is stale: run `{REGENERATE}`"


def test_the_check_script_fails_on_a_stale_page_and_names_the_fix(tmp_path):
    current = subprocess.run(
        [sys.executable, "scripts/cli_docs.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert current.returncode == 0, current.stderr
    stale = tmp_path / "cli.md"
    stale.write_text(render(citegate).replace("entries shown per reason group", "entries per group"), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "scripts/cli_docs.py", "--check", "--page", str(stale)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"{stale} is stale: run `{REGENERATE}` to regenerate it" in done.stderr


def test_every_command_has_one_entry():
    assert sorted(reference()) == sorted(commands())


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_option_of_a_command_is_in_its_entry(name):
    synopsis = reference().get(name, "")
    words = set(re.findall(r"[\w-]+", synopsis))
    arguments = [param for param in commands()[name].params if "--help" not in param.opts]
    missing = [word for param in arguments for word in documented(param) if word not in words]
    assert not missing, f"docs/cli.md's entry for `citegate {name}` lacks {missing}"
    flags = {flag for param in arguments for flag in param.opts}
    unknown = set(re.findall(r"--[a-z][a-z-]*", synopsis)) - flags
    assert not unknown, f"docs/cli.md's entry for `citegate {name}` names options it does not take: {sorted(unknown)}"


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_has_help_and_an_example(name):
    text = REFERENCE.read_text(encoding="utf-8").split(f"\n## citegate {name}\n", 1)[1].split("\n## ", 1)[0]
    assert f"Usage: citegate {name}" in text
    assert re.search(rf"Example:\n( +citegate {name}\b.*\n)+", text), f"`citegate {name} --help` has no example"


def test_the_readme_points_to_the_reference():
    assert "docs/cli.md" in README.read_text(encoding="utf-8")


def test_a_newcomer_still_starts_with_two_commands():
    two = README.read_text(encoding="utf-8").split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in two and "make test" in two


def _complete(words: str) -> list[str]:
    """What bash completion offers after `words` (click's protocol, as the sourced script asks it)."""
    env = {
        **os.environ,
        "_CITEGATE_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    done = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_shell_completion_completes_commands_options_and_choices():
    source = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli"],
        env={**os.environ, "_CITEGATE_COMPLETE": "bash_source"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "complete -o nosort -F _citegate_completion citegate" in source.stdout  # what the docs tell bash to eval
    assert "_CITEGATE_COMPLETE=bash_source citegate" in REFERENCE.read_text(encoding="utf-8")
    assert _complete("citegate ca") == ["plain,calibrate"]
    assert _complete("citegate queue --reason span_t") == ["plain,span_truncated"]
    assert "plain,--workers" in _complete("citegate run --wo")
