"""The commands that read the published copy: queue, review, label, metrics, trace and rejects. None imports dagster;
the reports are rendered by lib/review/queue_view.py, lib/metrics/metrics_view.py and lib/ingest/rejects_view.py, their
SQL lives in sql/."""

from __future__ import annotations

import sys
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

import click

from citegate_assets.cli.options import DAY, READER_PATHS, example, load_config, readable, settings_from, shared
from citegate_assets.lib.calibration.label_log import DEFAULT_SEED as DEFAULT_LABEL_SEED
from citegate_assets.lib.calibration.label_log import DEFAULT_SIZE as DEFAULT_LABEL_SIZE
from citegate_assets.lib.core import paths as where
from citegate_assets.lib.core.reasons import QUEUE_REASONS
from citegate_assets.lib.core.terminal import ident, quote, safe

if TYPE_CHECKING:
    import duckdb

    from citegate_assets.lib.ingest.profiles import Profile


@click.command(
    epilog=example(
        "citegate queue --reason span_truncated --surface help-center",
        "citegate queue show 'acme-0004#0'",
    )
)
@click.argument("action", required=False, type=click.Choice(["show"]))
@click.argument("citation_id", required=False)
@click.option(
    "--reason",
    default=None,
    type=click.Choice(QUEUE_REASONS),
    metavar="REASON",
    help="only this reason: " + ", ".join(QUEUE_REASONS),
)
@click.option("--surface", default=None, metavar="SURFACE", help="only this surface (one the published copy holds)")
@click.option(
    "--status",
    default=None,
    type=click.Choice(["open", "accepted", "repaired", "escalated"]),
    help="only entries with this status",
)
@click.option("--limit", type=int, default=3, metavar="N", help="entries shown per reason group (default 3)")
@shared(*READER_PATHS)
def queue(**params: Any) -> int:
    """The review queue, grouped by reason; `citegate queue show CITATION_ID` shows one entry with the prompt
    around its span.

    A citation id is the request id, `#`, and the citation's position in the answer (acme-0004#0)."""
    from citegate_assets.lib.review.queue_view import render_context, render_entry, render_groups, render_unlocated
    from citegate_assets.lib.storage.warehouse import connect, query

    settings = settings_from(params)
    with connect(readable(settings), read_only=True) as con:
        if params["action"] == "show":
            citation_id = params["citation_id"]
            if citation_id is None:
                raise ValueError("usage: citegate queue show CITATION_ID")
            rel = query(con, "review/queue_entry", {"citation_id": citation_id})  # the id exactly as typed
            rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
            if not rows:
                raise ValueError(
                    f"no queue entry {quote(citation_id)}: it passes both gates, or it is not in this "
                    f"warehouse{did_you_mean(con, citation_id)}"
                )
            entry = rows[0]
            start, end = entry["found_start"], entry["found_end"]
            where_found = "where the span was found"
            if start is None and entry["section_start"] is not None:
                start, end, where_found = (
                    entry["section_start"],
                    entry["section_end"],
                    "the cited chunk's section (the span is not in it)",
                )
            elif start is None:
                start, end, where_found = (
                    entry["context_start"],
                    entry["context_end"],
                    "the context block (the cited chunk is not in it)",
                )
            print(render_entry(entry, passage_chars=4000))
            if start is None:  # the context block was not found: show what the profile looked for, and the prompt
                print()
                print(render_unlocated(entry, _profile_for(settings, entry["template"])))
                return 0
            print(f"\n  prompt (normalized), around {where_found}:")
            print(render_context(entry["prompt_normalized"], start, end))
            return 0
        if params["surface"] is not None:
            _check_surface(con, params["surface"])
        filters = {"reason": params["reason"], "surface": params["surface"], "status": params["status"]}
        rel = query(con, "review/queue_groups", filters)
        groups = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        rel = query(con, "review/queue_entries", {**filters, "limit": max(params["limit"], 0)})
        entries = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    print(render_groups(groups, entries))
    return 0


def _check_surface(con: duckdb.DuckDBPyConnection, surface: str) -> None:
    """A surface the published copy never logged is a mistyped filter, not an empty selection."""
    from citegate_assets.lib.storage.warehouse import query

    known = [name for (name,) in query(con, "review/known_surfaces").fetchall()]
    if surface not in known:
        listed = ", ".join(quote(name) for name in known) or "none yet (run `citegate run` first)"
        raise click.BadParameter(
            f"{quote(surface)} is not a surface of this warehouse; known: {listed}", param_hint="'--surface'"
        )


@click.command(
    epilog=example(
        "citegate review 'acme-0004#0' accept --note 'the span is a faithful paraphrase'",
        "citegate review 'acme-0007#1' escalate --cause truncation",
    )
)
@click.argument("citation_id")
@click.argument("outcome")
@click.option("--cause", default=None, metavar="CAUSE", help="escalate: chunking | truncation | ranking | other")
@click.option("--note", default=None, metavar="TEXT", help="a note recorded with the decision")
@click.option("--reviewer", default=None, metavar="NAME", help="default: $CITEGATE_REVIEWER, else your user name")
@shared(*READER_PATHS, "config", "reviews")
def review(**params: Any) -> int:
    """Record a decision on a queue entry (appends to the reviews log).

    OUTCOME: accept (the gate was too strict) | repair (fix the answer) | escalate (fix the cause, with --cause)."""
    from citegate_assets.lib.review.reviews import append_review, make_review
    from citegate_assets.lib.storage.warehouse import connect, query

    citation_id = params["citation_id"]
    fields = dict(
        citation_id=citation_id,
        outcome=params["outcome"],
        cause=params["cause"],
        note=params["note"],
        reviewer=params["reviewer"],
    )
    make_review(**fields, queue_reason="-", claim="-", passage=None)  # refuse a bad outcome or cause before anything
    settings = settings_from(params)
    load_config(settings)
    with connect(readable(settings), read_only=True) as con:
        rows = query(con, "report/review_lookup", {"citation_id": citation_id}).fetchall()
        hint = did_you_mean(con, citation_id) if not rows else ""
    if not rows:
        raise ValueError(
            f"no queue entry {quote(citation_id)}: see `citegate queue` for the entries (nothing was written){hint}"
        )
    reason, claim, passage, status = rows[0]
    decision = make_review(**fields, queue_reason=reason, claim=claim, passage=passage)
    if decision.citation_id != citation_id:  # the id looked up is the id recorded, never altered
        raise RuntimeError(
            f"the review would record {quote(decision.citation_id)}, not {quote(citation_id)}: nothing was written"
        )
    # the same resolution the run uses (lib/core/paths.py), so the next run of this warehouse reads it
    path = append_review(settings.reviews, decision)
    cause = f" ({safe(decision.cause)})" if decision.cause else ""
    print(
        f"recorded {safe(decision.outcome)}{cause} on {ident(decision.citation_id)} by {ident(decision.reviewer)} in "
        f"{safe(path)}\nits status ({safe(status)} now) follows on the next run: citegate run, or the nightly schedule"
    )
    return 0


LABEL_KEYS = {"y": "yes", "p": "partial", "n": "no", "s": "skip"}


@click.command(epilog=example("citegate label --labeller ana --sample-size 50"))
@click.option(
    "--labeller", default=None, metavar="NAME", help="your name (default: $CITEGATE_REVIEWER, else your user name)"
)
@click.option(
    "--sample-seed",
    type=int,
    default=DEFAULT_LABEL_SEED,
    metavar="N",
    help=f"the sample's seed: the same seed draws the same pairs (default {DEFAULT_LABEL_SEED})",
)
@click.option(
    "--sample-size",
    type=int,
    default=DEFAULT_LABEL_SIZE,
    metavar="N",
    help=f"pairs per surface (default {DEFAULT_LABEL_SIZE})",
)
@shared(*READER_PATHS, "config", "labels")
def label(**params: Any) -> int:
    """Label a seeded, stratified sample of this warehouse's own citations, blind (the passage and the claim only),
    into the labels folder: what a support gate is enforced on.

    One pair at a time: y yes, p partial, n no, s skip, u undo, q quit; each key appended to own-labels.jsonl in the
    labels folder. The review page's Label tab is its twin."""
    from citegate_assets.lib.calibration.label_log import (
        LOG_NAME,
        LabelError,
        append_label,
        make_line,
        read_label_log,
        replay,
    )
    from citegate_assets.lib.calibration.own_labels import (
        checked_size,
        draw_sample,
        line_for,
        next_pair,
        progress,
        undo_line,
    )
    from citegate_assets.lib.review.reviews import default_reviewer
    from citegate_assets.lib.storage.warehouse import connect

    settings = settings_from(params)
    load_config(settings)
    seed, size = checked_size(params["sample_seed"], params["sample_size"])
    labeller = (params["labeller"] if params["labeller"] is not None else default_reviewer()).strip()
    if not labeller:
        raise ValueError("--labeller: give your name (it is recorded with every label)")
    folder = settings.labels
    if folder.exists() and not folder.is_dir():
        raise ValueError(
            f"{folder}: a file ({settings.sources['labels'][1]}); own labels are appended to {LOG_NAME} in a labels "
            "folder: name a folder with --labels"
        )
    with connect(readable(settings), read_only=True) as con:
        sample = draw_sample(con, seed, size)
    print(
        safe(
            f"labelling as {labeller} into {folder / LOG_NAME}  ({settings.sources['labels'][1]}): sample seed {seed}, "
            f"{size} pairs per surface, {len(sample.pairs)} pairs over {len(sample.surfaces())} surfaces"
        )
    )
    print("For each pair: does the PASSAGE support the CLAIM? y yes, p partial, n no, s skip, u undo, q quit")
    undone: str | None = None
    while True:
        standing = replay(read_label_log(folder))
        done = progress(sample, standing, labeller)
        print("progress: " + ", ".join(f"{safe(p.surface)} {p.labelled} of {p.total}" for p in done))
        pair = next_pair(sample, standing, labeller, undone)
        if not sample.pairs:
            print("no provenance-passing citations to label yet: run `citegate run` first")
            return 0
        if pair is None:
            print("every pair of the sample is labelled; next: citegate calibrate (or the nightly run) uses them")
            return 0
        print(f"\nPASSAGE:\n{safe(pair.passage)}\nCLAIM:\n{safe(pair.claim)}")
        key = _ask("label [y/p/n/s/u/q]> ")
        if key is None or key == "q":
            print("stopped; next: citegate calibrate (or the nightly run) uses the labels so far")
            return 0
        undone = None
        try:
            if key in LABEL_KEYS:
                append_label(folder, make_line(**line_for(pair, sample, LABEL_KEYS[key], labeller)))
            elif key == "u":
                last = standing.last_of(labeller)
                if last is None:
                    print("nothing to undo")
                    continue
                append_label(folder, make_line(**undo_line(last, labeller)))
                undone = last.pair_key
            else:
                print("type y, p, n, s, u or q")
        except LabelError as exc:
            raise ValueError(str(exc)) from None


def _ask(prompt: str) -> str | None:
    """One answer from the terminal, or a line of piped input; None at the end of input."""
    if sys.stdin.isatty():
        try:
            return input(prompt).strip().lower()
        except EOFError:
            return None
    print(prompt, flush=True)
    line = sys.stdin.readline()
    return line.strip().lower() if line else None


@click.command(epilog=example("citegate metrics --weeks 8"))
@click.option("--weeks", type=int, default=4, metavar="N", help="how many recent weeks (default 4)")
@shared(*READER_PATHS)
@click.option(
    "--lock",
    is_flag=True,
    help="pin new metric definition versions in sql/metrics/metrics.lock.json (source checkout only)",
)
def metrics(**params: Any) -> int:
    """The weekly numbers per surface (four rates and the unjudged share), each beside its definition."""
    from citegate_assets.lib.metrics.metrics_view import render_metrics
    from citegate_assets.lib.metrics.preregistered import load_definitions, update_lock
    from citegate_assets.lib.reporting import gate_summary
    from citegate_assets.lib.storage.warehouse import connect, query

    if params["lock"]:
        if where.source_checkout() is None:
            raise RuntimeError(
                "`citegate metrics --lock` preregisters definitions in the project's sql/metrics/metrics.lock.json; "
                f"this citegate is an installed package ({where.sql_dir()}), whose definitions and lock must not "
                "change. Run it in a source checkout (pip install -e .), commit the lock, and build a new wheel"
            )
        added = update_lock(load_definitions())
        print("pinned: " + (", ".join(added) if added else "nothing new; every definition is already in the lock"))
        return 0
    definitions = {d.name: d for d in load_definitions()}
    with connect(readable(settings_from(params)), read_only=True) as con:
        rel = query(con, "metric_tables/metrics_report", {"weeks": max(params["weeks"], 1)})
        rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        gates = query(con, "support/gate_status_rows")
        line = gate_summary([dict(zip(gates.columns, r)) for r in gates.fetchall()])
    print(render_metrics(definitions, rows))
    print(f"\n{line}")
    return 0


@click.command(epilog=example("citegate trace --metric provenance_pass_rate --surface help-center --week 2026-11-02"))
@click.option("--metric", required=True, metavar="METRIC", help="the metric's name, as `citegate metrics` prints it")
@click.option("--surface", required=True, metavar="SURFACE", help="the metric cell's surface")
@click.option(
    "--week", required=True, type=DAY, metavar="DATE", help="any date of the ISO week (weeks start on Monday)"
)
@click.option(
    "--breakdown",
    default=None,
    metavar="VALUE",
    help="for a breakdown metric: the chunking strategy, rank, reason or judge model",
)
@click.option("--limit", type=int, default=20, metavar="N", help="rows shown (default 20)")
@shared(*READER_PATHS)
def trace(**params: Any) -> int:
    """From one metric cell to the citations and prompts behind it."""
    from citegate_assets.lib.metrics.metrics_view import no_cell, render_trace
    from citegate_assets.lib.storage.warehouse import connect, query

    day: date = params["week"]
    week = day - timedelta(days=day.weekday())  # the Monday of that ISO week
    args = {
        "metric": params["metric"],
        "surface": params["surface"],
        "week": week,
        "breakdown": params["breakdown"],
        "limit": params["limit"],
    }
    with connect(readable(settings_from(params)), read_only=True) as con:
        rel = query(con, "metric_tables/trace_cell", args)
        cells = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        if not cells:
            choices: dict[str, list[str]] = {}
            for metric, breakdown in query(con, "metric_tables/trace_choices", args).fetchall():
                choices.setdefault(metric, []).extend([] if breakdown is None else [breakdown])
            raise ValueError(no_cell(choices, params["metric"], params["surface"], week, params["breakdown"]))
        rel = query(con, "metric_tables/trace_totals", args)
        [totals] = [dict(zip(rel.columns, v)) for v in rel.fetchall()]
        rows = query(con, "metric_tables/trace_rows", args).limit(max(params["limit"], 0)).fetchall()
    print(render_trace(cells[0], totals, rows, params["breakdown"]))
    return 0


@click.command(epilog=example("citegate rejects --reason missing_field --limit 10"))
@click.option("--file", default=None, metavar="NAME", help="only this landing file's rejects (its name)")
@click.option(
    "--reason", default=None, metavar="REASON", help="only this reject reason (e.g. missing_field, invalid_json)"
)
@click.option("--limit", type=int, default=50, metavar="N", help="rows shown (default 50)")
@shared(*READER_PATHS)
def rejects(**params: Any) -> int:
    """The rejected lines of the published copy: file:line, reason and detail, every logged value escaped (line 0:
    a whole file); exit 1 when any match, 0 when none."""
    from citegate_assets.lib.ingest.rejects_view import render_rejects
    from citegate_assets.lib.storage.warehouse import connect, query

    args = {"file": params["file"], "reason": params["reason"], "limit": max(params["limit"], 0)}
    with connect(readable(settings_from(params)), read_only=True) as con:
        rows = query(con, "report/rejects_list", args).fetchall()
        [(count,)] = query(con, "report/rejects_count", args).fetchall()
    filters = "".join(
        f" with {name} {quote(value)}" for name, value in (("file", args["file"]), ("reason", args["reason"])) if value
    )
    print(render_rejects(rows, count, filters))
    return 1 if count else 0


def did_you_mean(con: duckdb.DuckDBPyConnection, typed: str) -> str:
    """A hint, never a substitute: the queue's ids that differ from the typed one only by blanks at either end
    (ids are used exactly as stored; request ids may hold spaces, so " r1#2" and "r1#2" are two citations), or,
    for a request id, that request's queue entries (acme-0004 -> acme-0004#0)."""
    from citegate_assets.lib.storage.warehouse import query

    core = typed.strip()
    if not core:
        return ""
    candidates = query(con, "report/near_citation_ids", {"core": core}).fetchall()
    near = [cid for (cid,) in candidates if cid != typed and cid.strip() == core][:5]
    if near:
        return (
            "; did you mean "
            + " or ".join(quote(cid) for cid in near)
            + "? (ids are used exactly as typed, blanks included)"
        )
    entries = [cid for (cid,) in query(con, "report/request_queue_ids", {"request_id": typed}).fetchall()]
    if entries:
        shown = " or ".join(quote(cid) for cid in entries[:5]) + (
            f" ({len(entries)} in all)" if len(entries) > 5 else ""
        )
        return f"; {quote(typed)} is a request id: its queue entries are {shown}"
    [(citations,)] = query(con, "report/request_citation_count", {"request_id": typed}).fetchall()
    if citations:
        return f"; {quote(typed)} is a request id: none of its {citations} citations is in the queue"
    return ""


def _profile_for(settings: where.Settings, template: str | None) -> Profile | None:
    """The profile named `template`: built in, or from the config file in force (None when neither has it)."""
    from citegate_assets.lib.ingest.profiles import BUILTIN_PROFILES

    if template is None:  # no template logged: no profile read the prompt
        return None
    if template in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[template]
    try:
        return load_config(settings).profile(template)
    except (ValueError, OSError):  # a bad or missing config file: the prompt is still worth showing
        return None


COMMANDS = (queue, review, label, metrics, trace, rejects)
