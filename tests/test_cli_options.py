"""Every option that several commands take is declared once (cli.OPTIONS), so it parses, defaults and reads
the same in each of them; a flag name that means a different thing per command is listed here with why."""

from __future__ import annotations

import argparse

from citegate_assets.cli import OPTIONS, build_parser

# One name, a different option per command: --start is the first day gen-logs writes (default 2026-11-02) or
# the first day run gates (default: the logs'); --limit counts entries per reason group (queue), rows (trace)
# or records examined per surface (doctor); --surface filters the queue but names the metric cell in trace.
PER_COMMAND = {"--start", "--limit", "--surface"}
COMPARED = ("dest", "default", "type", "help", "metavar", "nargs", "const", "choices", "required")


def commands() -> dict[str, argparse.ArgumentParser]:
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_a_shared_option_is_the_same_in_every_command():
    seen: dict[str, tuple[str, tuple]] = {}
    shared = set()
    for name, parser in commands().items():
        for action in parser._actions:
            for flag in action.option_strings:
                if flag in ("-h", "--help") or flag in PER_COMMAND:
                    continue
                shape = tuple(getattr(action, key) for key in COMPARED)
                if flag in seen:
                    shared.add(flag)
                    first, first_shape = seen[flag]
                    assert shape == first_shape, f"{flag} differs between `{first}` and `{name}`"
                else:
                    seen[flag] = (name, shape)
    declared = {flag for option in OPTIONS.values() for flag in option.flags}
    assert shared <= declared, f"declare these once in cli.OPTIONS: {sorted(shared - declared)}"
    assert {"--warehouse", "--published", "--logs", "--config", "--quiet", "--days", "--seed"} <= shared


def test_every_declared_option_is_used():
    used = {flag for parser in commands().values() for action in parser._actions for flag in action.option_strings}
    assert {flag for option in OPTIONS.values() for flag in option.flags} <= used
