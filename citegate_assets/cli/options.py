"""The options several commands take, each declared once as a click decorator, and what every command shares:
the resolved settings, the config in force, the published copy readers open, and the help's example.

Every path comes from citegate_assets.lib.core.paths (flag, then environment, then config file, then default); the
writers print what they resolved, and exactly that goes into the run."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from citegate_assets.lib.core import paths as where
from citegate_assets.lib.core.terminal import safe

if TYPE_CHECKING:
    from citegate_assets.lib.config import Config

F = TypeVar("F", bound=Callable[..., Any])

# What each path is, for every command that takes it (the default and its precedence are appended).
_PATH_HELP = {
    "config": "citegate.toml",
    "landing": "landing folder of citegate-log/1 files, which demo writes",
    "warehouse": "the working DuckDB file: run, demo and calibrate write it, creating it if missing; "
    "queue, metrics, trace and review read its published copy",
    "published": "the read-only published copy, the only file queue, metrics, trace and review open",
    "reviews": "reviews log folder, which review appends to and run reads",
    "labels": "hand labels, a file or a folder (label and serve append own labels to own-labels.jsonl in a folder); "
    "demo draws labels from its generated logs' truth when no flag, variable or config file names them",
    "dagster_home": "Dagster instance folder",
    "lake": "the Delta tables, partitioned by day, the published copy's views read (run writes them): a folder, "
    "or s3://bucket/prefix (docs/object-storage.md)",
}


def _path_option(name: str) -> Callable[[F], F]:
    """A path flag with its place in the one precedence (see lib/core/paths.py, docs "Where every file goes")."""
    config_key = ", else [%s].%s" % where.CONFIG_KEYS[name] if name in where.CONFIG_KEYS else ""
    default = "./citegate.toml if present" if name == "config" else where.DEFAULTS[name]
    if name == "dagster_home":
        default = (
            "the project's dagster_home/ when run from the project folder on its default warehouse, else " + default
        )
    text = f"{_PATH_HELP[name]} (default: ${where.ENV[name]}{config_key}, else {default})"
    return click.option(
        where.FLAGS[name], name, type=click.Path(path_type=Path), default=None, metavar="PATH", help=text
    )


def _day(text: str | date) -> date:
    if isinstance(text, date):  # a default given as a date
        return text
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a date (YYYY-MM-DD)") from None


DAY = _day  # as a click type: YYYY-MM-DD, else a usage error (exit 2)

# Every option that several commands take, declared once; `shared(...)` adds them to a command.
SHARED: dict[str, Callable[[Any], Any]] = {
    **{name: _path_option(name) for name in where.NAMES},
    "days": click.option(
        "--days", type=int, default=14, metavar="N", help="days of sample logs, one file a day (default 14)"
    ),
    "requests_per_day": click.option(
        "--requests-per-day", type=int, default=300, metavar="N", help="sample requests per day (default 300)"
    ),
    "seed": click.option(
        "--seed", type=int, default=7, metavar="N", help="the same seed writes the same logs (default 7)"
    ),
    "trace_format": click.option(
        "--from",
        "trace_format",
        required=True,
        metavar="FORMAT",
        help="the file's trace format: otlp | openinference | langfuse | anthropic (docs: trace formats)",
    ),
    "out": click.option(
        "--out",
        type=click.Path(path_type=Path),
        required=True,
        metavar="DIR",
        help="folder to write into, created if missing (gen-logs: the landing folder; import: its citegate-log/1 "
        "file, never overwritten)",
    ),
    "end": click.option(
        "--end",
        type=DAY,
        default=None,
        metavar="DATE",
        help="last day, inclusive, YYYY-MM-DD (default: run: the last complete day in the logs; estimate: the last "
        "day in the published copy)",
    ),
    "quiet": click.option(
        "--quiet",
        is_flag=True,
        help="print only citegate's own lines (the paths, the summary or report), no Dagster log lines",
    ),
    "host": click.option(
        "--host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address to listen on (default 127.0.0.1: this machine only)",
    ),
    "port": click.option("--port", type=int, default=8080, metavar="N", help="port to listen on (default 8080)"),
    "auth": click.option(
        "--auth",
        default="local",
        type=click.Choice(["local", "proxy", "tokens"]),
        help="who is reviewing: local (the page asks the name once, kept in a signed cookie), proxy (a trusted "
        "reverse proxy sets --auth-header), tokens (per-reviewer tokens in --tokens) (default local)",
    ),
    "auth_header": click.option(
        "--auth-header",
        default="X-Forwarded-User",
        metavar="NAME",
        help="with --auth proxy: the header the proxy sets to the reviewer's name; only the proxy may reach the port "
        "(default X-Forwarded-User)",
    ),
    "tokens": click.option(
        "--tokens",
        type=click.Path(path_type=Path),
        default=None,
        metavar="FILE",
        help="with --auth tokens: a 0600 file of `NAME TOKEN` lines, one per reviewer",
    ),
}

# The path options every command that writes the pipeline's files takes, in the order help lists them.
PIPELINE_PATHS = ("landing", "warehouse", "config", "published", "reviews", "labels", "dagster_home", "lake")
READER_PATHS = ("warehouse", "published")


def shared(*names: str) -> Callable[[F], F]:
    """Add the named shared options to a command, listed in help in this order."""

    def add(command: F) -> F:
        for name in reversed(names):  # click lists the decorator nearest the function last
            command = SHARED[name](command)
        return command

    return add


def example(*lines: str) -> str:
    """A command's help epilog: one or more example command lines, kept as written (`\\b` stops click rewrapping)."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


def settings_from(params: dict[str, Any], **overrides: Any) -> where.Settings:
    """The settings from a command's path flags (the ones it does not take count as not given)."""
    flags = {name: params.get(name) for name in where.NAMES}
    return where.resolve(**{**flags, **overrides})


def load_config(settings: where.Settings) -> Config:
    """The config in force, checked (a bad key is an error that names it)."""
    from citegate_assets.lib.config import load_config as load
    from citegate_assets.lib.config import parse_config

    return load(settings.config) if settings.config else parse_config({}, None)


def readable(settings: where.Settings) -> Path:
    """The published copy, the only file readers open: a run may be writing the working file, and DuckDB
    allows one writer or many readers. Without a published copy, say so; never fall back. A copy whose lake
    is gone is one message naming the folder, not a DuckDB error on the first file it misses."""
    from citegate_assets.lib.storage.publish import missing_lake_folders

    published = settings.published
    if not published.exists():
        raise FileNotFoundError(
            f"{published}: no published copy ({settings.sources['published'][1]}; warehouse {settings.warehouse}, "
            f"{settings.sources['warehouse'][1]}). Readers open only the published copy, never the working file a run "
            "may be writing: run `citegate run` first (its last step publishes the copy)"
        )
    missing = missing_lake_folders(published)
    if missing:
        lake = os.path.commonpath([str(Path(uri).parent) for uri in missing])
        tables = ", ".join(Path(uri).name for uri in missing[:3]) + (", …" if len(missing) > 3 else "")
        raise FileNotFoundError(
            f"{published}: its lake folder {lake} is missing ({len(missing)} Delta tables the published copy reads: "
            f"{tables}). Was the warehouse moved or copied without it? Move the lake folder back to {lake}, or "
            "move the warehouse together with its .lake and .text folders"
        )
    print(safe(f"reading {published}  ({settings.sources['published'][1]})"), file=sys.stderr)
    return published


def describe(settings: where.Settings, *names: str) -> str:
    """The resolved paths a command uses, one line each, escaped for the terminal."""
    lines = settings.describe()
    if names:
        lines = [line for name, line in zip(where.NAMES, lines) if name in names]
    return safe("\n".join(lines), newlines=True)
