"""The `citegate` command line: demo, gen-logs, run."""

import argparse
import os
import sys
import textwrap
import time
from datetime import date, timedelta
from pathlib import Path

from citegate_assets.defs.resources import PROJECT_ROOT

DEFAULT_LANDING = PROJECT_ROOT / "data" / "landing"
DEFAULT_WAREHOUSE = PROJECT_ROOT / "data" / "warehouse.duckdb"
DEFAULT_TRUTH = PROJECT_ROOT / "data" / "demo-truth.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, RuntimeError, OSError) as exc:
        print(f"citegate: error: {exc}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="citegate", description="Audit RAG citations against the prompts that were really sent.")
    sub = p.add_subparsers(title="commands")

    demo = sub.add_parser("demo", help="generate realistic sample logs and run the whole pipeline on them")
    demo.add_argument("--logs", type=Path, default=DEFAULT_LANDING, help="landing folder to write (default: data/landing)")
    demo.add_argument("--warehouse", type=Path, default=DEFAULT_WAREHOUSE, help="DuckDB file (default: data/warehouse.duckdb)")
    demo.add_argument("--config", type=Path, default=None, help="citegate.toml (default: the project's)")
    demo.add_argument("--requests-per-day", type=int, default=300)
    demo.add_argument("--days", type=int, default=14)
    demo.add_argument("--seed", type=int, default=7)
    demo.set_defaults(func=cmd_demo)

    gen = sub.add_parser("gen-logs", help="write citegate-log/1 sample files (deterministic per seed)")
    gen.add_argument("--out", type=Path, required=True, help="landing folder to write")
    gen.add_argument("--days", type=int, default=14)
    gen.add_argument("--requests-per-day", type=int, default=300)
    gen.add_argument("--seed", type=int, default=7)
    gen.add_argument("--start", type=date.fromisoformat, default=date(2026, 11, 2), help="first day (UTC), YYYY-MM-DD")
    gen.add_argument("--prompt-kb", type=int, default=None, help="pad prompts to about this many KB")
    gen.add_argument("--truth", type=Path, default=None, help="also write the expected reason of every citation here")
    gen.add_argument("--no-malformed", action="store_true", help="write only valid lines")
    gen.set_defaults(func=cmd_gen_logs)

    run = sub.add_parser("run", help="materialize every daily partition of the landing folder (what the nightly schedule does)")
    run.add_argument("--logs", type=Path, required=True, help="landing folder of citegate-log/1 files")
    run.add_argument("--warehouse", type=Path, required=True, help="DuckDB file to write (created if missing)")
    run.add_argument("--config", type=Path, default=None, help="citegate.toml (default: $CITEGATE_CONFIG, else the project's)")
    run.add_argument("--start", type=date.fromisoformat, default=None, help="first day to run, YYYY-MM-DD (default: first day in the logs)")
    run.add_argument("--end", type=date.fromisoformat, default=None, help="last day to run, inclusive (default: last complete day in the logs)")
    run.add_argument("--quiet", action="store_true", help="print only the summary")
    run.add_argument("--wait", type=float, default=0.0, help="if another run holds the warehouse, wait up to this many seconds (default: stop at once)")
    run.set_defaults(func=cmd_run)

    cal = sub.add_parser("calibrate", help="run the configured judge on the hand labels and print its false pass rate")
    cal.add_argument("--labels", type=Path, default=None, help="labels file or folder (default: [calibration].labels)")
    cal.add_argument("--warehouse", type=Path, default=DEFAULT_WAREHOUSE, help="DuckDB file (default: data/warehouse.duckdb)")
    cal.add_argument("--config", type=Path, default=None, help="citegate.toml (default: $CITEGATE_CONFIG, else the project's)")
    cal.set_defaults(func=cmd_calibrate)

    queue = sub.add_parser("queue", help="the review queue, grouped by reason (`citegate queue show CITATION_ID` for one entry)")
    queue.add_argument("action", nargs="?", choices=["show"], help="show one entry with the prompt around its span")
    queue.add_argument("citation_id", nargs="?", help="with `show`: the entry's citation id")
    queue.add_argument("--reason", default=None, help="only this reason (e.g. span_truncated, support_partial)")
    queue.add_argument("--surface", default=None, help="only this surface")
    queue.add_argument("--status", default=None, choices=["open", "accepted", "repaired", "escalated"], help="only entries with this status")
    queue.add_argument("--limit", type=int, default=3, help="entries shown per reason group (default 3)")
    queue.add_argument("--warehouse", type=Path, default=None, help="DuckDB file (default: $CITEGATE_WAREHOUSE or data/warehouse.duckdb)")
    queue.set_defaults(func=cmd_queue)

    review = sub.add_parser("review", help="record a decision on a queue entry (appends to the reviews log)")
    review.add_argument("citation_id")
    review.add_argument("outcome", help="accept (the gate was too strict) | repair (fix the answer) | escalate (fix the cause)")
    review.add_argument("--cause", default=None, help="escalate: chunking | truncation | ranking | other")
    review.add_argument("--note", default=None)
    review.add_argument("--reviewer", default=None, help="default: $CITEGATE_REVIEWER, else your user name")
    review.add_argument("--warehouse", type=Path, default=None, help="DuckDB file (default: $CITEGATE_WAREHOUSE or data/warehouse.duckdb)")
    review.add_argument("--config", type=Path, default=None, help="citegate.toml (default: $CITEGATE_CONFIG, else the project's)")
    review.add_argument("--reviews", type=Path, default=None, help="reviews log folder (default: $CITEGATE_REVIEWS, else [queue].reviews)")
    review.set_defaults(func=cmd_review)

    metrics = sub.add_parser("metrics", help="the four weekly numbers per surface, each beside its definition")
    metrics.add_argument("--weeks", type=int, default=4, help="how many recent weeks (default 4)")
    metrics.add_argument("--warehouse", type=Path, default=None, help="DuckDB file (default: the published copy of data/warehouse.duckdb)")
    metrics.add_argument("--lock", action="store_true", help="pin new metric definition versions in sql/metrics/metrics.lock.json")
    metrics.set_defaults(func=cmd_metrics)

    trace = sub.add_parser("trace", help="from one metric cell to the citations and prompts behind it")
    trace.add_argument("--metric", required=True)
    trace.add_argument("--surface", required=True)
    trace.add_argument("--week", required=True, type=date.fromisoformat, help="any date of the ISO week (weeks start on Monday)")
    trace.add_argument("--breakdown", default=None, help="for a breakdown metric: the chunking strategy, rank, reason or judge model")
    trace.add_argument("--limit", type=int, default=20, help="rows shown (default 20)")
    trace.add_argument("--warehouse", type=Path, default=None, help="DuckDB file (default: the published copy of data/warehouse.duckdb)")
    trace.set_defaults(func=cmd_trace)
    return p


def cmd_gen_logs(args) -> int:
    from citegate_assets.lib.loggen import generate_logs

    t0 = time.monotonic()
    summary = generate_logs(
        args.out,
        days=args.days,
        requests_per_day=args.requests_per_day,
        seed=args.seed,
        start_date=args.start.isoformat(),
        truth_path=args.truth,
        malformed=not args.no_malformed,
        prompt_kb=args.prompt_kb,
    )
    print(f"wrote {args.out} in {time.monotonic() - t0:.1f}s: {_short(summary)}")
    return 0


def cmd_run(args) -> int:
    return _run(args.logs, args.warehouse, args.config, args.start, args.end, quiet=args.quiet, wait_s=args.wait)


def cmd_demo(args) -> int:
    from citegate_assets.lib.loggen import generate_logs

    print(f"1/2 generating {args.days} days x {args.requests_per_day} requests of sample logs into {args.logs}")
    summary = generate_logs(
        args.logs, days=args.days, requests_per_day=args.requests_per_day, seed=args.seed, truth_path=DEFAULT_TRUTH
    )
    print(f"    {_short(summary)}")
    print(f"2/2 running the pipeline into {args.warehouse}")
    code = _run(args.logs, args.warehouse, args.config, None, None, quiet=False)
    if code == 0:
        print(_next_steps(args.warehouse))
    return code


def _run(logs: Path, warehouse: Path, config: Path | None, start, end, *, quiet: bool, wait_s: float = 0.0) -> int:
    from citegate_assets.lib.config import load_config
    from citegate_assets.pipeline import plan_days, run_range

    if not logs.is_dir():
        raise FileNotFoundError(f"{logs}: landing folder not found")
    cfg = load_config(config)  # fail fast on a bad config, naming the key
    plan = plan_days(logs, warehouse, start, end)
    print(f"running days {plan.start} .. {plan.end} (config: {cfg.path or 'built-in defaults'})")
    if plan.note:
        print(f"note: {plan.note}")
    t0 = time.monotonic()
    result = run_range(
        plan,
        landing=logs,
        warehouse=warehouse,
        config_file=config,
        log_level="ERROR" if quiet else "INFO",
        wait_s=wait_s,
        on_wait=lambda holder: print(f"waiting for the run that holds {warehouse} ({holder}) …", flush=True),
    )
    elapsed = time.monotonic() - t0
    if not result.success:
        _print_failure(result)
        print(f"run failed after {elapsed:.1f}s", file=sys.stderr)
        return 1
    print(f"run {result.run_id} succeeded in {elapsed:.1f}s")
    print(summarize(warehouse))
    return 0


def cmd_calibrate(args) -> int:
    from citegate_assets.lib.config import load_config
    from citegate_assets.pipeline import run_calibration

    load_config(args.config)
    if args.labels is not None and not args.labels.exists():
        raise FileNotFoundError(f"{args.labels}: labels file or folder not found")
    result = run_calibration(warehouse=args.warehouse, config_file=args.config, labels=args.labels)
    if not result.success:
        _print_failure(result)
        return 1
    print(calibration_report(args.warehouse))
    return 0


def _warehouse(path: Path | None) -> Path:
    chosen = path or (Path(os.environ["CITEGATE_WAREHOUSE"]) if os.environ.get("CITEGATE_WAREHOUSE") else DEFAULT_WAREHOUSE)
    if not chosen.exists():
        raise FileNotFoundError(f"{chosen}: no warehouse yet (run `make demo` or `citegate run` first)")
    return chosen


def _readable(path: Path | None) -> Path:
    """Readers use the published copy when there is one: it is never locked by a running pipeline."""
    chosen = _warehouse(path)
    published = chosen.with_name(chosen.stem + ".published.duckdb")
    return published if published.exists() else chosen


def cmd_metrics(args) -> int:
    from citegate_assets.lib.metrics import HEADLINE, load_definitions, update_lock
    from citegate_assets.lib.warehouse import connect, query

    if args.lock:
        added = update_lock(load_definitions())
        print("pinned: " + (", ".join(added) if added else "nothing new; every definition is already in the lock"))
        return 0
    definitions = {d.name: d for d in load_definitions()}
    with connect(_readable(args.warehouse), read_only=True) as con:
        rel = query(con, "metric_tables/metrics_report", {"weeks": max(args.weeks, 1)})
        rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    print("Definitions (preregistered in sql/metrics/, pinned in sql/metrics/metrics.lock.json):")
    for name in HEADLINE:
        d = definitions[name]
        print(f"  {name} v{d.version} = {d.numerator}  /  {d.denominator}")
        print(textwrap.fill(d.description, width=100, initial_indent="      ", subsequent_indent="      "))
    if not rows:
        print("\nno metrics yet: run `citegate run` first")
        return 0
    weeks = sorted({r["week_start"] for r in rows})
    for week in weeks:
        print(f"\nWeek of {week} (ISO week, Monday, UTC): value (numerator / denominator)")
        surfaces = sorted({r["surface"] for r in rows if r["week_start"] == week})
        header = f"  {'surface':<20}" + "".join(f"{m:>26}" for m in HEADLINE)
        print(header)
        for surface in surfaces:
            cells = {r["metric"]: r for r in rows if r["week_start"] == week and r["surface"] == surface}
            print(f"  {surface:<20}" + "".join(f"{_cell(cells.get(m)):>26}" for m in HEADLINE))
    return 0


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    num = "?" if row["numerator"] is None else f"{row['numerator']:,.1f}".removesuffix(".0")
    value = "NULL" if row["value"] is None else f"{row['value']:.3f}"
    return f"{value} ({num}/{row['denominator']:,})"


def cmd_trace(args) -> int:
    from citegate_assets.lib.warehouse import connect, query

    week = args.week - timedelta(days=args.week.weekday())  # the Monday of that ISO week
    params = {"metric": args.metric, "surface": args.surface, "week": week, "breakdown": args.breakdown, "limit": args.limit}
    with connect(_readable(args.warehouse), read_only=True) as con:
        rel = query(con, "metric_tables/trace_cell", params)
        cells = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        if not cells:
            raise ValueError(f"no cell for metric {args.metric!r}, surface {args.surface!r}, week of {week}"
                             + (f", breakdown {args.breakdown!r}" if args.breakdown else "") + " (see `citegate metrics`)")
        cell = cells[0]
        [totals] = [dict(zip(r.columns, v)) for r in [query(con, "metric_tables/trace_totals", params)] for v in r.fetchall()]
        rel = query(con, "metric_tables/trace_rows", params)
        rows = rel.limit(max(args.limit, 0)).fetchall()
    value = "NULL" if cell["value"] is None else f"{cell['value']:.4f}"
    print(f"{cell['metric']} v{cell['definition_version']}  surface={cell['surface']}  week of {cell['week_start']}"
          + (f"  breakdown={args.breakdown}" if args.breakdown else ""))
    print(f"  value {value} = numerator {cell['numerator']} / denominator {cell['denominator']}")
    print(f"  numerator:   {cell['numerator_words']}")
    print(f"  denominator: {cell['denominator_words']}")
    print(f"  behind it: {totals['denominator_rows']} citations from {totals['prompts']} prompts in the denominator; "
          f"{totals['numerator_rows']} count toward the numerator (sum of weights {totals['numerator_sum']})")
    print(f"\n  {'citation_id':<28}{'weight':>8}  {'request_id':<24}{'prompt sha256':<18}log")
    for citation_id, request_id, weight, sha, source_file, source_line, _ in rows:
        w = "NULL" if weight is None else f"{weight:.3f}".rstrip("0").rstrip(".")
        print(f"  {citation_id:<28}{w:>8}  {request_id:<24}{sha[:16]:<18}{source_file}:{source_line}")
    if totals["denominator_rows"] > len(rows):
        print(f"  … {totals['denominator_rows'] - len(rows)} more (--limit N)")
    return 0


def cmd_queue(args) -> int:
    from citegate_assets.lib.queue_view import render_context, render_entry, render_groups
    from citegate_assets.lib.warehouse import connect, query

    with connect(_readable(args.warehouse), read_only=True) as con:
        if args.action == "show":
            if not args.citation_id:
                raise ValueError("usage: citegate queue show CITATION_ID")
            rel = query(con, "review/queue_entry", {"citation_id": args.citation_id})
            rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
            if not rows:
                raise ValueError(f"no queue entry {args.citation_id!r}: it passes both gates, or it is not in this warehouse")
            entry = rows[0]
            start, end = entry["found_start"], entry["found_end"]
            where = "where the span was found"
            if start is None and entry["section_start"] is not None:
                start, end, where = entry["section_start"], entry["section_end"], "the cited chunk's section (the span is not in it)"
            elif start is None:
                start, end, where = entry["context_start"], entry["context_end"], "the context block (the cited chunk is not in it)"
            print(render_entry(entry, passage_chars=4000))
            print(f"\n  prompt (normalized), around {where}:")
            print(render_context(entry["prompt_normalized"], start, end))
            return 0
        filters = {"reason": args.reason, "surface": args.surface, "status": args.status}
        rel = query(con, "review/queue_groups", filters)
        groups = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        rel = query(con, "review/queue_entries", {**filters, "limit": max(args.limit, 0)})
        entries = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    print(render_groups(groups, entries))
    return 0


def cmd_review(args) -> int:
    from citegate_assets.defs.resources import WarehouseResource
    from citegate_assets.lib.config import load_config
    from citegate_assets.lib.reviews import append_review, make_review
    from citegate_assets.lib.warehouse import connect

    fields = dict(citation_id=args.citation_id, outcome=args.outcome, cause=args.cause, note=args.note, reviewer=args.reviewer)
    make_review(**fields, queue_reason="-", claim="-", passage=None)  # refuse a bad outcome or cause before anything else
    config = load_config(args.config)
    with connect(_readable(args.warehouse), read_only=True) as con:
        rows = con.sql(
            "select reason, claim, passage, status from citation_queue where citation_id = $id", params={"id": args.citation_id}
        ).fetchall()
    if not rows:
        raise ValueError(f"no queue entry {args.citation_id!r}: see `citegate queue` for the entries (nothing was written)")
    reason, claim, passage, status = rows[0]
    review = make_review(**fields, queue_reason=reason, claim=claim, passage=passage)
    folder = args.reviews or WarehouseResource(config_file=str(args.config) if args.config else "").reviews(config)
    path = append_review(folder, review)
    print(
        f"recorded {review.outcome}{' (' + review.cause + ')' if review.cause else ''} on {review.citation_id} by {review.reviewer} "
        f"in {path}\nits status ({status} now) follows on the next run: citegate run, or the nightly schedule"
    )
    return 0


def calibration_report(warehouse: Path) -> str:
    from citegate_assets.lib.reporting import text_table
    from citegate_assets.lib.warehouse import connect, query

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


def _print_failure(result) -> None:
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            error = getattr(event.event_specific_data, "error", None)
            if error is not None:
                print(f"failed in {event.step_key}: {error.message.strip()}", file=sys.stderr)
    print(f"run {result.run_id} failed", file=sys.stderr)


def summarize(warehouse: Path) -> str:
    from citegate_assets.lib.reporting import text_table
    from citegate_assets.lib.warehouse import connect, query

    with connect(warehouse, read_only=True) as con:
        ingest = query(con, "report/ingest_summary").pl()
        provenance = query(con, "report/provenance_by_surface").pl()
        rejects = query(con, "report/reject_reasons").pl()
        support = query(con, "support/verdicts_by_surface", {"start": date(2000, 1, 1), "end": date(9999, 1, 1)}).pl()
    return "\n".join(
        [
            "",
            "Warehouse",
            text_table(ingest),
            "",
            "Provenance reasons per surface (citations)",
            text_table(provenance),
            "",
            "Rejects by reason",
            text_table(rejects),
            "",
            "Support verdicts per surface (judged citations; pass = yes and no numeric mismatch)",
            text_table(support),
        ]
    ) + calibration_report(warehouse)


def _next_steps(warehouse: Path) -> str:
    return f"""
Next:
  make ui                      # Dagster UI on http://127.0.0.1:3000: assets by stage, lineage, the nightly schedule
  .venv/bin/citegate queue     # the review queue, grouped by reason; then `citegate review ID accept|repair|escalate`
  .venv/bin/citegate metrics   # the four weekly numbers per surface beside their definitions; `citegate trace` for the rows
  make test                    # the test suite
  .venv/bin/python -c "import duckdb; print(duckdb.connect('{warehouse}', read_only=True).sql(open('sql/examples/failures_by_reason.sql').read()))"
  README.md                    # the log format, the profiles, every table and more example queries
"""


def _short(summary: dict) -> str:
    keys = ("files", "records", "citations", "malformed_lines")
    return ", ".join(f"{k}={summary[k]}" for k in keys if k in summary)


if __name__ == "__main__":
    sys.exit(main())
