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

import polars as pl

from citegate_assets.lib.calibration.rates import wilson_interval
from citegate_assets.lib.core.terminal import safe
from citegate_assets.lib.reporting import gate_summary, text_table
from citegate_assets.lib.storage.warehouse import connect, query
from citegate_assets.lib.support.cascade import cascade_line, cascade_savings
from citegate_assets.lib.support.judge.base import UNJUDGED
from citegate_assets.lib.support.judge.tiers import JudgeTiers


class DayRange(Protocol):
    """The days a run gated (pipeline.RunPlan)."""

    start: date
    end: date


def calibration_report(warehouse: Path) -> str:
    """Both of the judge's error rates on the hand labels (false pass, false fail) with their intervals, on the
    reference labels and on the own labels (weighted to the traffic's mix, pooled and per surface), its confusion
    matrix, two labellers' agreement on own pairs, the support gate per surface with what it costs in true
    citations failed, and the one line: which judge, on which labels, the next step."""
    with connect(warehouse, read_only=True) as con:
        cal = query(con, "support/calibration_report").pl()
        matrix = query(con, "report/confusion").pl()
        gates = query(con, "support/gate_status_report").pl()
        agreement = query(con, "labels/agreement_report").pl()
        line = gate_summary(dicts(query(con, "support/gate_status_rows")))
    judged = cal.filter(pl.col("judged") > 0)
    labelled = gates.filter(pl.col("labels") != "none")
    # a table is shown only when it has rows to read: before any label is judged, the headlines and the
    # per-surface lines say so, not tables of nulls
    calibration = [
        text_table(
            judged.select(
                "judge_model",
                "tier",
                "labels",
                "surface",
                "error",
                "human",
                "judged",
                pl.col("effective_n").round(1),
                "errors_made",
                pl.col("rate", "ci95_low", "ci95_high").round(4),
                "verdict",
                pl.col("coverage").round(4),
            )
        )
    ]
    confusion = [
        "",
        "Confusion matrix (rows: judge, tier, labels and human label, columns: judge verdict; labels counted, not "
        "weighted)",
        text_table(matrix),
    ]
    gate_table = [
        "",
        f"Support gate per surface ({_judges(gates)}): enforced = false pass upper bound under the threshold, on "
        "own labels only (the surface's, or pooled over surfaces); labels = what the status rests on; "
        "too_strict = false fail rate over the threshold; judged_yes_rate = share of the judged citations the "
        "judge passed; extra_queue_per_week = judged_per_week x false_fail_rate (true citations the gate queues "
        "a week, taking every judged citation as supported)",
        text_table(gates.drop("judge_model", "template_version", "why", "next_step")),
    ]
    return "\n".join(
        [
            "",
            "Judge calibration on hand labels: false pass = judge says yes where the human said no/partial; "
            "false fail = judge does not say yes where the human said yes (judge errors count in neither). "
            "reference labels: shipped or external sets, unweighted; own labels: sampled from this warehouse's "
            "traffic (citegate label), weighted back to its mix (effective_n: the interval's effective sample size)",
            *_judge_headlines(cal),
            *(calibration if judged.height else ["  no hand label judged yet: no calibration table"]),
            *(confusion if matrix.height else []),
            *_agreement_lines(agreement),
            *(gate_table if labelled.height else ["", f"Support gate per surface ({_judges(gates)}):"]),
            *[f"  {safe(surface)}: {safe(why)}" for surface, why in gates.select("surface", "why").iter_rows()],
            "",
            line,
        ]
    )


def dicts(rel: Any) -> list[dict]:
    return [dict(zip(rel.columns, row)) for row in rel.fetchall()]


def _agreement_lines(agreement: pl.DataFrame) -> list[str]:
    """Two labellers on the same own pairs: Cohen's kappa over yes / partial / no."""
    if agreement.is_empty():
        return []
    lines = ["", "Labeller agreement on own pairs (Cohen's kappa over yes / partial / no)"]
    for first, second, pairs, agreed, kappa in agreement.iter_rows():
        said = "undefined (one label for every pair)" if kappa is None else f"{kappa:.3f}"
        lines.append(f"  {safe(first)} and {safe(second)}: {agreed} of {pairs} pairs agree, kappa {said}")
    return lines


def _judges(gates: pl.DataFrame) -> str:
    """The judge model(s) and template version(s) the gate status was computed for (one, after a run)."""
    pairs = gates.select("judge_model", "template_version").unique(maintain_order=True).rows()
    return ", ".join(f"judge {safe(model)}, template {safe(version)}" for model, version in pairs) or "no judge"


def _judge_headlines(cal: pl.DataFrame) -> list[str]:
    """One line per judge model, template version, tier and labels (pooled over surfaces): its recall and both
    error rates, in words, and for a tier its coverage (the share of the labels it decided)."""
    lines = []
    pooled = cal.filter(pl.col("surface") == "(all)")
    for (model, version, tier, labels), rows in pooled.group_by(
        "judge_model", "template_version", "tier", "labels", maintain_order=True
    ):
        by = {(r["error"], r["human"]): r for r in rows.iter_rows(named=True)}
        fp, ff = by.get(("false pass", "no or partial")), by.get(("false fail", "yes"))
        weighted = " weighted" if labels == "own" else ""
        if ff is None or ff["judged"] is None:
            fails = "false fail rate not measured (calibrated before schema 5: run citegate calibrate)"
        elif ff["judged"] == 0:
            fails = "false fail rate unknown (no human-yes labels judged)"
        else:
            said_yes = ff["judged"] - ff["errors_made"]
            fails = (
                f"recall {1 - ff['rate']:.1%}{weighted} (yes to {said_yes:,} of {ff['judged']:,} human-yes labels), "
                f"false fail rate {ff['rate']:.1%} (95% CI {ff['ci95_low']:.1%}-{ff['ci95_high']:.1%})"
            )
        if fp is None or not fp["judged"]:
            passes = "false pass rate unknown (no human no/partial labels judged)"
        else:
            passes = (
                f"false pass rate {fp['rate']:.1%}{weighted} (yes to {fp['errors_made']:,} of {fp['judged']:,} "
                f"human no/partial labels, 95% CI {fp['ci95_low']:.1%}-{fp['ci95_high']:.1%})"
            )
        coverage = rows["coverage"].drop_nulls()
        named = tier and (tier != "llm" or " > " in model)  # an LLM judge alone is its own tier: nothing to add
        which = f", tier {safe(tier)}" if named else ""
        if named and coverage.len():
            which += f", decided {coverage[0]:.1%} of the labels" + (" (weighted)" if weighted else "")
        lines.append(f"  {safe(model)} (template {safe(version)}{which}) on {labels} labels: {fails}; {passes}")
    return lines


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
        [(rejected,)] = query(con, "report/rejects_count", {"file": None, "reason": None}).fetchall()
        support = query(con, "support/verdicts_by_surface", window).pl()
        tiers = query(con, "report/support_tiers", window).pl()
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
            *(
                [f"  {rejected:,} rejected: `citegate rejects` lists each (file:line, reason, detail)"]
                if rejected
                else []
            ),
            "",
            f"Support verdicts per surface (judged citations{days_of}; pass = yes and no numeric mismatch; screen, "
            "llm = the verdicts each tier decided)",
            text_table(support),
            *tier_notes(tiers),
            calibration_report(warehouse),
        ]
    )


def judge_report(warehouse: Path, tiers: JudgeTiers) -> str:
    """Which judge ran; the screen's false pass and recall on held-out real labels (lib/support/judge/screen.py
    HELD_OUT);
    the hand labels calibration read, by origin, file and labeller; how to connect an LLM judge. Which labels each
    surface's status rests on is the gate's one line (lib/reporting.py gate_summary), printed above it."""
    from citegate_assets.lib.support.judge.screen import HELD_OUT, SCREEN_MODEL

    lines = ["", f"Judge: {safe(tiers.describe())}"]
    if tiers.screen is not None and tiers.screen.model == SCREEN_MODEL:
        lines.append(
            f"  {SCREEN_MODEL} on held-out real labels (test splits used for nothing else; count = rate "
            "[95% Wilson interval]):"
        )
        for h in HELD_OUT:
            lines.append(
                f"    {h.split} ({h.pairs:,} pairs): false pass {rate_cell(*h.false_pass)} (yes on human no or "
                f"partial), recall {rate_cell(*h.recall)} (yes on human yes)"
            )
    elif tiers.screen is not None:
        lines.append(
            f"  {safe(tiers.screen.model)} does not fail closed: its yes held no false pass bound on held-out data "
            "(docs/support-gate.md)"
        )
    if tiers.llm is not None:
        lines.append(
            f"  {safe(tiers.llm.model)}: its error rates are measured on your hand labels only (the calibration above)"
        )
    with connect(warehouse, read_only=True) as con:
        labels = query(con, "report/label_basis").pl()
    lines += label_inventory(labels)
    lines += connect_a_judge(tiers)
    return "\n".join(lines)


def rate_cell(k: int, n: int) -> str:
    """count/of = rate [95% Wilson interval], in percent."""
    if not n:
        return "-"
    low, high = wilson_interval(k, n)
    return f"{k}/{n} = {100 * k / n:.1f}% [{100 * (low or 0):.1f}, {100 * (high or 0):.1f}]"


def label_inventory(labels: pl.DataFrame) -> list[str]:
    """The hand labels calibration read (report/label_basis.sql): per origin (own, reference), file and labeller."""
    if not labels.height:
        return ["  Hand labels: none (calibration rests on no labels)"]
    total = int(labels["labels"].sum())
    lines = [
        f"  Hand labels calibration read ({total:,}; own: sampled from this warehouse's traffic, reference: any other):"
    ]
    for row in labels.iter_rows(named=True):
        lines.append(
            f"    {row['origin']}: {safe(row['source_file'])}, labeller {safe(row['labeller'])}: {row['labels']:,} "
            f"({row['yes']:,} yes, {row['partial']:,} partial, {row['no']:,} no)"
        )
    return lines


def connect_a_judge(tiers: JudgeTiers) -> list[str]:
    """How to connect an LLM judge, or how the connected one is used."""
    if tiers.llm is None:
        return [
            '  Connect a judge (README "Connect a real judge": OpenAI, vLLM, llama.cpp server, Ollama): an '
            "OpenAI-compatible endpoint decides what the screen leaves, e.g.",
            "    CITEGATE_JUDGE_BASE_URL=http://127.0.0.1:11434/v1 CITEGATE_JUDGE_MODEL=qwen2.5:7b-instruct make demo",
            '  or [judge] base_url and model in citegate.toml, with mode = "cascade" to keep the screen in front '
            "(the LLM judge is called only on what it leaves undecided).",
        ]
    if tiers.tier != "cascade":
        return [
            f'  [judge] mode = "cascade" puts the screen in front of {safe(tiers.llm.model)}: it is called only on '
            "what the screen leaves undecided"
        ]
    return []


def tier_notes(rows: pl.DataFrame) -> list[str]:
    """The unjudged citations, named, and what the cascade saved; rows: judge_model, verdict, decided_by, cost_usd."""
    notes = []
    unjudged = rows.filter(pl.col("verdict") == UNJUDGED)
    if unjudged.height:
        screens = ", ".join(safe(m) for m in sorted(set(unjudged["judge_model"].to_list())))
        notes.append(
            f"  {unjudged.height:,} citation(s) unjudged: {screens} left them undecided and no LLM judge is "
            "configured. Never a pass: queued as support_unjudged, outside support_pass_rate, counted in "
            'support_unjudged_rate. Connect a judge to decide them (README "Connect a real judge").'
        )
    screen = rows.filter(pl.col("decided_by") == "screen")["judge_model"].unique().to_list()
    if screen and (rows["decided_by"] == "llm").any():
        notes.append("  " + cascade_line(cascade_savings(rows, screen[0], cascade=True)))
    return notes


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
            f"{prog} serve{warehouse_flag}",
            "the same queue as a web page on http://127.0.0.1:8080, decided with the keyboard",
        ),
        (
            f"{prog} label{warehouse_flag}",
            "label a sample of your own citations, blind: a support gate is enforced on own labels only",
        ),
        (
            f"{prog} metrics{warehouse_flag}",
            "the weekly numbers per surface beside their definitions; `citegate trace` for the rows",
        ),
        ("make test", "the test suite"),
        ("docs/", "the log format, the profiles, every table, where every file goes (`make docs` builds the site)"),
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
