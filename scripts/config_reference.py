"""Writes docs/configuration-reference.md from the config schema: every section of citegate.toml, every key with its
type, default and meaning, read from the section dataclasses that citegate_assets/lib/config.py composes (each
field's check and doc, lib/core/config_fields.py) and the template profile's fields (lib/ingest/profiles.py). The page
is never
edited by hand.

    python scripts/config_reference.py           # rewrite the page
    python scripts/config_reference.py --check   # exit 1 when the page is stale (tests/test_config_reference.py)
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import MISSING, fields
from pathlib import Path

from citegate_assets.lib import config
from citegate_assets.lib.ingest.profiles import CHUNK_REFS, CONTEXT_MESSAGES, UNESCAPES, Profile

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration-reference.md"
COMMAND = "python scripts/config_reference.py"

# the profile's fields are all strings; these three are choices (validate_profile checks them)
PROFILE_CHOICES = {"chunk_ref": CHUNK_REFS, "unescape": UNESCAPES, "context_message": CONTEXT_MESSAGES}


def _default(f) -> str:
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value is None or value == {}:
        return "unset"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _summary(cls) -> str:
    """The first paragraph of a section's docstring, after its `[name]:`."""
    first = (cls.__doc__ or "").strip().split("\n\n")[0]
    return _cell(first.split(":", 1)[1] if first.startswith("[") else first).strip()


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    lines = ["| key | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{key}` | {_cell(kind)} | {default} | {_cell(doc)} |" for key, kind, default, doc in rows]
    return lines


def _config_rows(cls) -> list[tuple[str, str, str, str]]:
    rows = []
    for f in fields(cls):
        if "check" not in f.metadata:
            continue  # a fixed part of the section, such as a surface's name
        rows.append((f.name, getattr(f.metadata["check"], "expected", ""), _default(f), f.metadata["doc"]))
    return rows


def _profile_rows() -> list[tuple[str, str, str, str]]:
    rows = []
    for f in fields(Profile):
        if "doc" not in f.metadata:
            continue
        kind = f"one of {', '.join(PROFILE_CHOICES[f.name])}" if f.name in PROFILE_CHOICES else "a string"
        rows.append((f.name, kind, _default(f), f.metadata["doc"]))
    return rows


def render() -> str:
    sections: list[tuple[str, str, list[tuple[str, str, str, str]]]] = [
        ("surfaces.NAME", _summary(config.SurfacePolicy), _config_rows(config.SurfacePolicy)),
        (
            "templates.NAME",
            "a template profile of your own, with the fields the built-ins use (docs/profiles.md); a surface names "
            "it in its template key",
            _profile_rows(),
        ),
    ]
    for name, cls in config._SECTIONS.items():
        sections.append((name, _summary(cls), _config_rows(cls)))
        if cls is config.JudgeConfig:
            sections.append(
                ("judge.secondary", _summary(config.SecondaryJudgeConfig), _config_rows(config.SecondaryJudgeConfig))
            )
    lines = [
        "# Configuration reference",
        "",
        f"Generated from the config schema (`citegate_assets/lib/config.py`) by `{COMMAND}`; do not edit it by "
        "hand. Every key is checked when the file is loaded, for its type and range, and an unknown key is an error "
        "that names it. The file: `--config FILE`, else `CITEGATE_CONFIG`, else `./citegate.toml`, else the "
        "defaults below. A sample with comments: [configuration.md](configuration.md).",
    ]
    for name, summary, rows in sections:
        lines += ["", f"## [{name}]", "", summary[0].upper() + summary[1:].rstrip(".") + ".", ""] + _table(rows)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the page differs from the schema")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is stale: run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
