"""`citegate rejects` and doctor's list of rejected lines: file:line, reason and detail, one a line, every logged
value escaped for the terminal (lib/core/terminal.py). No dagster import: the CLI's readers load this alone."""

from __future__ import annotations

from collections.abc import Iterable

from citegate_assets.lib.core.terminal import safe

DOCTOR_SHOWN = 5  # rejected lines doctor lists before "N more: citegate rejects"
COMMAND = "citegate rejects"


def reject_line(source_file: str, line_no: int | None, reason: str, detail: str | None) -> str:
    """One rejected line (a whole file's reject has line 0): `file:line  reason  detail`."""
    where = f"{safe(source_file)}:{line_no if line_no is not None else 0}"
    return f"{where}  {safe(reason)}  {safe(detail or '')}".rstrip()


def render_rejects(rows: Iterable[tuple], matching: int, filters: str = "") -> str:
    """The listed rows (source_file, line_no, reason, detail), and how many more match."""
    shown = [reject_line(*row[:4]) for row in rows]
    if not shown:
        return f"no rejected lines{filters}"
    more = matching - len(shown)
    tail = [f"{more:,} more: {COMMAND} --limit {matching}"] if more > 0 else []
    return "\n".join([f"{matching:,} rejected lines{filters} (by file and line):", *shown, *tail])


def doctor_rejects(rows: list[tuple[str, int, str, str]], shown: int = DOCTOR_SHOWN) -> list[str]:
    """Doctor's lines for the landing folder's lines that would be rejected: the first few, then how many more."""
    if not rows:
        return []
    ordered = sorted(rows, key=lambda r: (r[0], r[1]))
    out = [f"  {len(rows):,} lines would be rejected:"]
    out += [f"    {reject_line(*row)}" for row in ordered[:shown]]
    if len(rows) > shown:
        out.append(f"    {len(rows) - shown:,} more: {COMMAND} (after `citegate run`)")
    return out
