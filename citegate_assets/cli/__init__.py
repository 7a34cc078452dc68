"""The `citegate` command line, on click: one module per group of commands (pipeline_commands: demo, gen-logs, run,
calibrate, forget; reader_commands: queue, review, label, metrics, trace, rejects; tool_commands: doctor, import,
estimate, serve), the options several of them take declared once in options.py.

Exit codes: what the command returns (0, or 1 for "found something": rejects, a failed run), 2 for a usage error
or a refused input (the message says what is wrong), 130 when interrupted. Dagster is imported only by the commands
that run it (run, demo, calibrate): the readers start fast. docs/cli.md is generated from this help
(scripts/cli_docs.py)."""

from __future__ import annotations

import sys

import click

from citegate_assets.cli import pipeline_commands, reader_commands, tool_commands
from citegate_assets.cli.options import example
from citegate_assets.lib.core.terminal import safe

COMPLETION = 'eval "$(_CITEGATE_COMPLETE=bash_source citegate)"'


class _InOrder(click.Group):
    """Commands listed in help in the order a newcomer meets them (demo first), not alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(
    cls=_InOrder,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=example(
        "citegate demo",
        "citegate doctor --logs data/landing && citegate run && citegate queue",
        "",
        f"Shell completion (bash; zsh: zsh_source, fish: fish_source): {COMPLETION}",
    ),
)
def citegate() -> None:
    """Audit RAG citations against the prompts that were really sent.

    `citegate COMMAND --help` shows a command's options, each with its default, and an example."""


for command in (*pipeline_commands.COMMANDS, *reader_commands.COMMANDS, *tool_commands.COMMANDS):
    citegate.add_command(command)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code. A usage error exits at once with code 2 (SystemExit), as it always has."""
    from citegate_assets.lib.core.private import private_umask

    private_umask()  # everything a command writes holds prompt text
    try:
        code = citegate.main(args=argv, prog_name="citegate", standalone_mode=False)
    except click.exceptions.Abort:  # Ctrl-C (click turns KeyboardInterrupt into Abort)
        print("interrupted", file=sys.stderr)
        return 130
    except click.ClickException as exc:  # a usage error: the usage line, the message, exit 2
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except (ValueError, FileNotFoundError, RuntimeError, OSError) as exc:
        print(f"citegate: error: {safe(exc)}", file=sys.stderr)  # messages may quote logged values
        return 2
    return int(code or 0)


__all__ = ["citegate", "main", "COMPLETION"]
