"""Plain-text reports of the writing commands (`citegate run`, `demo`, `calibrate`, `gen-logs`): the warehouse
summary after a run, the calibration report, a failed run's steps and checks, and the demo's next steps.

Every value from the logs goes through lib.terminal.safe (text_table escapes its cells). No dagster import:
a failed run's result is read by its attributes."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Protocol

from citegate_assets.lib.reporting import text_table
from citegate_assets.lib.terminal import safe
from citegate_assets.lib.warehouse import connect, query


class DayRange(Protocol):
    """The days a run gated (pipeline.RunPlan)."""

    start: date
    end: date


def calibration_report(warehouse: Path) -> str:
    """The judge's false pass rate on the hand labels, its confusion matrix and the support gate per surface."""
    with connect(warehouse, read_only=True) as con:
        cal = query(con, "report/calibration").pl()
        matrix = query(con, "report/confusion").pl()
        gates = query(con, "report/gate_status").pl()
    return "\n".join(
        [
            "",
            "Judge calibration on hand labels (false pass = judge says yes where the human said no/partial)",
            text_table(cal),
            "",
            "Confusion matrix (rows: human label, columns: judge verdict)",
            text_table(matrix),
            "",
            "Support gate per surface",
            text_table(gates),
        ]
    )


def summarize(warehouse: Path, plan: DayRange | None = None) -> str:
    """The warehouse after a run. With the run's plan, the gate tables cover only the days it gated, and
    later days (ingested by this run, gated by the run that covers them) are named as such."""
    window = {"start": date(2000, 1, 1), "end": date(9999, 1, 1)}
    if plan is not None:
        window = {"start": plan.start, "end": plan.end + timedelta(days=1)}  # the queries take [start, end)
    with connect(warehouse, read_only=True) as con:
        ingest = query(con, "report/ingest_summary").pl()
        provenance = query(con, "report/provenance_by_surface", window).pl()
        rejects = query(con, "report/reject_reasons").pl()
        support = query(con, "support/verdicts_by_surface", window).pl()
        days = query(con, "report/days").fetchall()
    days_of = "" if plan is None else f", {plan.start} .. {plan.end}"
    return "\n".join(
        [
            "",
            "Warehouse",
            text_table(ingest),
            *_ingest_notes(dict(ingest.iter_rows())),
            *([] if plan is None else _days_notes(plan, days)),
            "",
            f"Provenance reasons per surface (citations{days_of})",
            text_table(provenance),
            "",
            "Rejects by reason",
            text_table(rejects),
            "",
            f"Support verdicts per surface (judged citations{days_of}; pass = yes and no numeric mismatch)",
            text_table(support),
        ]
    ) + calibration_report(warehouse)


def _ingest_notes(n: dict) -> list[str]:
    """Why "prompts" is not the number of records written: every line read is a prompt or a rejected line, and
    a record whose answer alone is bad (citations unparseable, a citation with an empty field) keeps its prompt."""
    read, prompts = n.get("lines read", 0), n.get("prompts (records ingested)", 0)
    rejected, answers = n.get("lines rejected (ingest_rejects)", 0), n.get("answers rejected (answer_rejects)", 0)
    notes = []
    if read == prompts + rejected:
        notes.append(
            f"  prompts {prompts:,} = lines read {read:,} - lines rejected {rejected:,} (invalid lines, duplicate "
            "and conflicting request ids: see Rejects by reason)"
        )
    if answers:
        notes.append(
            f"  {answers:,} of these prompts are malformed records whose answer was rejected (answer_rejects: "
            "citations unparseable or with an empty field): the prompt is kept, its citations are not checked"
        )
    return notes


def _days_notes(plan: DayRange, days: Sequence[tuple]) -> list[str]:
    """What this run gated, and the days after its range it only ingested (the current UTC day, say)."""
    covered = [(p, c) for day, p, c, _ in days if plan.start <= day <= plan.end]
    later = [(day, p) for day, p, _, _ in days if day > plan.end]
    notes = [
        f"  gated by this run: {plan.start} .. {plan.end} ({sum(p for p, _ in covered):,} prompts, "
        f"{sum(c for _, c in covered):,} citations)"
    ]
    if later:
        names = ", ".join(str(day) for day, _ in later[:5]) + (f" and {len(later) - 5} more" if len(later) > 5 else "")
        n = sum(p for _, p in later)
        notes.append(
            f"  ingested, not yet gated: {names} ({n:,} prompt{'' if n == 1 else 's'}; gated by the run that "
            "covers their day, e.g. the next nightly run)"
        )
    return notes


def run_failure(result: Any) -> str:
    """What failed in a Dagster run (an ExecuteInProcessResult, read by attribute): each failed step's error
    with its root cause, then each failed check with its metadata tables, every logged value escaped."""
    lines = []
    printed = False
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            error = getattr(event.event_specific_data, "error", None)
            if error is not None and (
                event.step_key is not None or not printed
            ):  # the run's failure repeats its step's
                root = error
                while root.cause is not None:  # e.g. the run lock refusal under a resource's init error
                    root = root.cause
                cause = f"\n  caused by: {_message(root.message)}" if root is not error else ""
                lines.append(f"failed in {safe(event.step_key or 'the run')}: {_message(error.message)}{cause}")
                printed = True
    for check in result.get_asset_check_evaluations():
        if check.passed:
            continue
        level = "warning" if check.severity.value == "WARN" else "failed"
        lines.append(
            f"\ncheck {safe(check.asset_key.to_user_string())}.{safe(check.check_name)} {level}"
            + (f": {_message(check.description)}" if check.description else "")
        )
        for name, value in (check.metadata or {}).items():
            text = str(getattr(value, "value", value)).strip()
            if text and text != "_no rows_":  # tables of logged values: every line escaped, and indented
                lines.append(f"  {safe(name)}:\n" + textwrap.indent(safe(text, newlines=True), "    "))
    lines.append(f"run {result.run_id} failed")
    return "\n".join(lines)


def _message(text: str) -> str:
    """An error message that may quote logged values: escaped, its further lines indented under its first."""
    return textwrap.indent(safe(text.strip(), newlines=True), "    ").lstrip()


def next_steps(prog: str, warehouse_flag: str, published: Path, example_query: Path) -> str:
    """What to try after `citegate demo`: prog is the command as typed, warehouse_flag "" or " --warehouse W"."""
    steps = [
        (
            "make ui",
            "Dagster UI on http://127.0.0.1:3000 (Ctrl-C stops it): assets by stage, lineage, the nightly schedule",
        ),
        (
            f"{prog} queue{warehouse_flag}",
            "the review queue, grouped by reason; then `citegate review ID accept|repair|escalate`",
        ),
        (
            f"{prog} metrics{warehouse_flag}",
            "the four weekly numbers per surface beside their definitions; `citegate trace` for the rows",
        ),
        ("make test", "the test suite"),
        ("README.md", "the log format, the profiles, every table, where every file goes, more example queries"),
    ]
    width = max(len(cmd) for cmd, _ in steps) + 2
    python = (
        f"python -c \"import duckdb; print(duckdb.connect('{published}', read_only=True)"
        f".sql(open('{example_query}').read()))\""
    )
    return "\nNext:\n" + "".join(f"  {cmd:<{width}}# {what}\n" for cmd, what in steps) + f"  {python}\n"


def generated_logs(summary: dict, prompt_kept_kinds: Sequence[str]) -> str:
    """What gen-logs wrote, and how many prompts a run into an empty warehouse will ingest from it."""
    keys = ("files", "records", "citations", "malformed_lines")
    text = ", ".join(f"{k}={summary[k]}" for k in keys if k in summary)
    kinds = summary.get("malformed_kinds") or {}
    kept = sum(kinds.get(k, 0) for k in prompt_kept_kinds)
    if (
        summary.get("malformed_lines") and "records" in summary
    ):  # records are the valid lines; the warehouse counts prompts
        text += (
            f"\n    records are the valid lines; {kept} of the malformed lines ({', '.join(prompt_kept_kinds)}) keep "
            f"their prompt and lose their answer, the other {summary['malformed_lines'] - kept} are rejected "
            f"(invalid, duplicate or conflicting lines): a run into an empty warehouse ingests "
            f"{summary['records'] + kept} prompts"
        )
    return text
