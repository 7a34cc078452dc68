"""Every option that several commands take is declared once (cli/options.py SHARED), so it parses, defaults and
reads the same in each of them; a flag name that means a different thing per command is listed here with why."""

from __future__ import annotations

import click

from citegate_assets.cli import citegate
from citegate_assets.cli.options import SHARED

# One name, a different option per command: --start is the first day gen-logs writes (default 2026-11-02) or
# the first day run gates (default: the logs'); --limit counts entries per reason group (queue), rows (trace)
# or records examined per surface (doctor); --surface filters the queue but names the metric cell in trace;
# --reason is one of the queue's reasons in queue, a reject reason in rejects.
PER_COMMAND = {"--start", "--limit", "--surface", "--reason"}


def commands() -> dict[str, click.Command]:
    return dict(citegate.commands)


def _shape(param: click.Parameter) -> dict:
    """Everything click knows of an option: name, type, default, help, metavar, nargs, choices, required."""
    return {**param.to_info_dict(), "metavar": param.metavar}


def declared() -> set[str]:
    """The flags of the options declared once, in SHARED."""
    flags = set()
    for decorator in SHARED.values():
        command = click.command()(decorator(lambda **_: None))
        flags |= {opt for param in command.params for opt in param.opts}
    return flags


def test_a_shared_option_is_the_same_in_every_command():
    seen: dict[str, tuple[str, dict]] = {}
    shared = set()
    for name, command in commands().items():
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            for flag in param.opts:
                if flag in ("-h", "--help") or flag in PER_COMMAND:
                    continue
                shape = _shape(param)
                if flag in seen:
                    shared.add(flag)
                    first, first_shape = seen[flag]
                    assert shape == first_shape, f"{flag} differs between `{first}` and `{name}`"
                else:
                    seen[flag] = (name, shape)
    assert shared <= declared(), f"declare these once in cli/options.py SHARED: {sorted(shared - declared())}"
    assert {"--warehouse", "--published", "--logs", "--config", "--quiet", "--days", "--seed"} <= shared


def test_every_declared_option_is_used():
    used = {opt for command in commands().values() for param in command.params for opt in param.opts}
    assert declared() <= used
