"""Plain-text rendering of the weekly metrics and of one metric cell's trace (`citegate metrics`, `citegate trace`).

Every value from the logs goes through lib.terminal.safe: control characters are shown, never obeyed."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping, Sequence

from citegate_assets.lib.core.terminal import ident, quote, safe
from citegate_assets.lib.metrics.preregistered import HEADLINE, MetricDefinition


def render_metrics(definitions: Mapping[str, MetricDefinition], rows: Sequence[dict]) -> str:
    """The headline definitions, then per week a table of surfaces by metric: value (numerator / denominator)."""
    out = ["Definitions (preregistered in sql/metrics/, pinned in sql/metrics/metrics.lock.json):"]
    for name in HEADLINE:
        d = definitions[name]
        out.append(f"  {name} v{d.version} = {safe(d.numerator)}  /  {safe(d.denominator)}")
        out.append(textwrap.fill(safe(d.description), width=100, initial_indent="      ", subsequent_indent="      "))
    if not rows:
        out.append("\nno metrics yet: run `citegate run` first")
        return "\n".join(out)
    for week in sorted({r["week_start"] for r in rows}):
        out.append(f"\nWeek of {week} (ISO week, Monday, UTC): value (numerator / denominator)")
        surfaces = sorted({r["surface"] for r in rows if r["week_start"] == week})
        width = max([20, *(len(ident(s)) + 2 for s in surfaces)])
        out.append(f"  {'surface':<{width}}" + "".join(f"{m:>26}" for m in HEADLINE))
        for surface in surfaces:
            cells = {r["metric"]: r for r in rows if r["week_start"] == week and r["surface"] == surface}
            out.append(f"  {ident(surface):<{width}}" + "".join(f"{_cell(cells.get(m)):>26}" for m in HEADLINE))
    return "\n".join(out)


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    num = "?" if row["numerator"] is None else f"{row['numerator']:,.1f}".removesuffix(".0")
    value = "NULL" if row["value"] is None else f"{row['value']:.3f}"
    return f"{value} ({num}/{row['denominator']:,})"


def number(x: object, places: int = 4) -> str:
    """A number for people: NULL, or rounded to `places` decimals without trailing zeros (12, 0.3333, 1204.5)."""
    if x is None:
        return "NULL"
    return f"{x:.{places}f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


def render_trace(cell: dict, totals: dict, rows: Sequence[tuple], breakdown: str | None) -> str:
    """One metric cell: its value and definition, what is behind it, and the first rows (citation, weight,
    request, prompt hash, log line); rows are as sql/metric_tables/trace_rows.sql returns them."""
    value = "NULL" if cell["value"] is None else f"{cell['value']:.4f}"
    out = [
        f"{safe(cell['metric'])} v{cell['definition_version']}  surface={ident(cell['surface'])}  "
        f"week of {cell['week_start']}" + (f"  breakdown={ident(breakdown)}" if breakdown else "")
    ]
    if cell["denominator"] is None:  # a count: the value is the numerator
        out.append(f"  value {number(cell['value'])}: a count (numerator {number(cell['numerator'])}, no denominator)")
    else:
        out.append(
            f"  value {value} = numerator {number(cell['numerator'])} / denominator {number(cell['denominator'])}"
        )
    out.append(f"  numerator:   {safe(cell['numerator_words'])}")
    out.append(f"  denominator: {safe(cell['denominator_words'])}")
    rows_are = "rows" if cell["denominator"] is None else "citations in the denominator,"
    out.append(
        f"  behind it: {totals['denominator_rows']} {rows_are} from {totals['prompts']} prompts; "
        f"{totals['numerator_rows']} count toward the numerator (sum of weights {number(totals['numerator_sum'])})"
    )
    cw = max([28, *(len(ident(r[0])) + 2 for r in rows)])  # ids are shown escaped, so as wide as they print
    rw = max([24, *(len(ident(r[1])) + 2 for r in rows)])
    out.append(f"\n  {'citation_id':<{cw}}{'weight':>8}  {'request_id':<{rw}}{'prompt sha256':<18}log")
    for citation_id, request_id, weight, sha, source_file, source_line, _ in rows:
        w = "NULL" if weight is None else f"{weight:.3f}".rstrip("0").rstrip(".")
        out.append(
            f"  {ident(citation_id):<{cw}}{w:>8}  {ident(request_id):<{rw}}{safe(sha[:16]):<18}"
            f"{safe(source_file)}:{source_line}"
        )
    if totals["denominator_rows"] > len(rows):
        out.append(f"  … {totals['denominator_rows'] - len(rows)} more (--limit N)")
    return "\n".join(out)


def no_cell(
    choices: Mapping[str, Iterable[str]], metric: str, surface: str, week: object, breakdown: str | None
) -> str:
    """Why there is no such cell, listing what there is: choices maps each metric of the surface and week to
    its breakdown values (none for a headline metric)."""
    cell = f"surface {quote(surface)}, week of {week}"
    if not choices:
        return f"no metrics for {cell} (see `citegate metrics` for the surfaces and weeks)"
    if metric not in choices:
        return f"no metric {quote(metric)} for {cell}; its metrics: {', '.join(map(safe, choices))}"
    values = ", ".join(map(ident, choices[metric]))
    if not values:
        return f"{safe(metric)} has no breakdowns: drop --breakdown {quote(breakdown)}"
    if breakdown is None:
        return f"{safe(metric)} is a breakdown metric: give --breakdown, one of (for {cell}): {values}"
    return f"no breakdown {quote(breakdown)} of {safe(metric)} for {cell}; its breakdowns: {values}"
