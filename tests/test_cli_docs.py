"""docs/cli.md documents every command and every option of every command (sqlite-utils keeps its docs honest
the same way): one entry per command whose synopsis names all its options. The README still starts with the two
commands."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from citegate_assets.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
ENTRY = re.compile(r"^- `citegate ([a-z-]+)([^`]*)`", re.MULTILINE)


def commands() -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def reference() -> dict[str, str]:
    """Command name -> its synopsis in docs/cli.md."""
    return {name: synopsis for name, synopsis in ENTRY.findall(REFERENCE.read_text(encoding="utf-8"))}


def documented(action: argparse.Action) -> list[str]:
    """How an argument is written in a synopsis: its flags, its choices (`show`), or its name (CITATION_ID)."""
    if action.option_strings:
        return [flag for flag in action.option_strings if flag.startswith("--")]
    return [str(choice) for choice in action.choices] if action.choices else [action.dest.upper()]


def test_every_command_has_one_entry():
    assert sorted(reference()) == sorted(commands())


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_option_of_a_command_is_in_its_entry(name):
    synopsis = reference().get(name, "")
    words = set(re.findall(r"[\w-]+", synopsis))
    arguments = [action for action in commands()[name]._actions if not isinstance(action, argparse._HelpAction)]
    missing = [word for action in arguments for word in documented(action) if word not in words]
    assert not missing, f"docs/cli.md's entry for `citegate {name}` lacks {missing}"
    flags = {flag for action in arguments for flag in action.option_strings}
    unknown = set(re.findall(r"--[a-z][a-z-]*", synopsis)) - flags
    assert not unknown, f"docs/cli.md's entry for `citegate {name}` names options it does not take: {sorted(unknown)}"


def test_a_newcomer_still_starts_with_two_commands():
    two = README.read_text(encoding="utf-8").split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0]
    assert "make demo" in two and "make test" in two
