"""The `citegate` command line: demo, gen-logs, run, calibrate, queue, review, metrics, trace.

Every path comes from citegate_assets.lib.settings (flag, then environment, then config file, then
default); the writers print what they resolved, and exactly that goes into the run."""

import argparse
import sys
import textwrap
import time
from datetime import date, timedelta
from pathlib import Path

from citegate_assets.lib import settings as where
from citegate_assets.lib.terminal import ident, quote, safe

_PATH_HELP = {
    "config": "citegate.toml",
    "landing": "landing folder of citegate-log/1 files",
    "warehouse": "the working DuckDB file",
    "published": "the read-only published copy",
    "reviews": "reviews log folder",
    "labels": "hand labels, a file or a folder",
    "dagster_home": "Dagster instance folder",
}


def _path_flags(parser: argparse.ArgumentParser, *names: str, notes: dict | None = None) -> None:
    """The path flags, each with its place in the one precedence (see lib/settings.py, README "Where every file goes")."""
    for name in names:
        config_key = ", else [%s].%s" % where.CONFIG_KEYS[name] if name in where.CONFIG_KEYS else ""
        default = "./citegate.toml if present" if name == "config" else where.DEFAULTS[name]
        text = (notes or {}).get(name) or _PATH_HELP[name]
        parser.add_argument(
            where.FLAGS[name],
            type=Path,
            default=None,
            dest=name,
            metavar="PATH",
            help=f"{text} (default: ${where.ENV[name]}{config_key}, else {default})".replace("%", "%%"),
        )


def _settings(args, **overrides) -> "where.Settings":
    flags = {name: getattr(args, name, None) for name in where.NAMES}
    return where.resolve(**{**flags, **overrides})


def main(argv: list[str] | None = None) -> int:
    from citegate_assets.lib.private import private_umask

    private_umask()  # everything a command writes holds prompt text
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
        print(f"citegate: error: {safe(exc)}", file=sys.stderr)  # messages may quote logged values
        return 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="citegate", description="Audit RAG citations against the prompts that were really sent."
    )
    sub = p.add_subparsers(title="commands")

    demo = sub.add_parser("demo", help="generate realistic sample logs and run the whole pipeline on them")
    _path_flags(
        demo,
        "landing",
        "warehouse",
        "config",
        "published",
        "reviews",
        "labels",
        "dagster_home",
        notes={
            "landing": "landing folder to write",
            "labels": "hand labels (when no flag, variable or config file names "
            "them: the 224 demo labels shipped in the package)",
        },
    )
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

    run = sub.add_parser(
        "run", help="materialize every daily partition of the landing folder (what the nightly schedule does)"
    )
    _path_flags(
        run,
        "landing",
        "warehouse",
        "config",
        "published",
        "reviews",
        "labels",
        "dagster_home",
        notes={"warehouse": "DuckDB file to write (created if missing)"},
    )
    run.add_argument(
        "--start",
        type=date.fromisoformat,
        default=None,
        help="first day to run, YYYY-MM-DD (default: first day in the logs)",
    )
    run.add_argument(
        "--end",
        type=date.fromisoformat,
        default=None,
        help="last day to run, inclusive (default: last complete day in the logs)",
    )
    run.add_argument("--quiet", action="store_true", help="print only the summary")
    run.add_argument(
        "--final",
        action="store_true",
        help="every landing file is finished: read an unterminated last line too (default: hold it back "
        "until the file has not changed for [ingest].settle_seconds)",
    )
    run.add_argument(
        "--wait",
        type=float,
        default=0.0,
        help="if another run holds the warehouse, wait up to this many seconds (default: stop at once)",
    )
    run.set_defaults(func=cmd_run)

    cal = sub.add_parser(
        "calibrate",
        help="run the configured judge on the hand labels, print its false pass rate and publish the copy readers open",
    )
    _path_flags(cal, "labels", "warehouse", "config", "published", "dagster_home")
    cal.add_argument("--quiet", action="store_true", help="print only the report (no Dagster log lines)")
    cal.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="Dagster's console log level (default WARNING: warnings and errors only)",
    )
    cal.set_defaults(func=cmd_calibrate)

    queue = sub.add_parser(
        "queue", help="the review queue, grouped by reason (`citegate queue show CITATION_ID` for one entry)"
    )
    queue.add_argument("action", nargs="?", choices=["show"], help="show one entry with the prompt around its span")
    queue.add_argument("citation_id", nargs="?", help="with `show`: the entry's citation id")
    queue.add_argument("--reason", default=None, help="only this reason (e.g. span_truncated, support_partial)")
    queue.add_argument("--surface", default=None, help="only this surface")
    queue.add_argument(
        "--status",
        default=None,
        choices=["open", "accepted", "repaired", "escalated"],
        help="only entries with this status",
    )
    queue.add_argument("--limit", type=int, default=3, help="entries shown per reason group (default 3)")
    _path_flags(
        queue, "warehouse", "published", notes={"warehouse": "the working DuckDB file, whose published copy is read"}
    )
    queue.set_defaults(func=cmd_queue)

    review = sub.add_parser("review", help="record a decision on a queue entry (appends to the reviews log)")
    review.add_argument("citation_id")
    review.add_argument(
        "outcome", help="accept (the gate was too strict) | repair (fix the answer) | escalate (fix the cause)"
    )
    review.add_argument("--cause", default=None, help="escalate: chunking | truncation | ranking | other")
    review.add_argument("--note", default=None)
    review.add_argument("--reviewer", default=None, help="default: $CITEGATE_REVIEWER, else your user name")
    _path_flags(
        review,
        "warehouse",
        "published",
        "config",
        "reviews",
        notes={"warehouse": "the working DuckDB file (its published copy is read; its reviews log is written)"},
    )
    review.set_defaults(func=cmd_review)

    metrics = sub.add_parser("metrics", help="the four weekly numbers per surface, each beside its definition")
    metrics.add_argument("--weeks", type=int, default=4, help="how many recent weeks (default 4)")
    _path_flags(
        metrics, "warehouse", "published", notes={"warehouse": "the working DuckDB file, whose published copy is read"}
    )
    metrics.add_argument(
        "--lock",
        action="store_true",
        help="pin new metric definition versions in sql/metrics/metrics.lock.json (source checkout only)",
    )
    metrics.set_defaults(func=cmd_metrics)

    trace = sub.add_parser("trace", help="from one metric cell to the citations and prompts behind it")
    trace.add_argument("--metric", required=True)
    trace.add_argument("--surface", required=True)
    trace.add_argument(
        "--week", required=True, type=date.fromisoformat, help="any date of the ISO week (weeks start on Monday)"
    )
    trace.add_argument(
        "--breakdown", default=None, help="for a breakdown metric: the chunking strategy, rank, reason or judge model"
    )
    trace.add_argument("--limit", type=int, default=20, help="rows shown (default 20)")
    _path_flags(
        trace, "warehouse", "published", notes={"warehouse": "the working DuckDB file, whose published copy is read"}
    )
    trace.set_defaults(func=cmd_trace)

    doctor = sub.add_parser(
        "doctor", help="does each surface's template fit its prompts? (reads the logs only, no warehouse)"
    )
    _path_flags(doctor, "landing", "config")
    doctor.add_argument("--limit", type=int, default=1000, help="records examined per surface (default 1000; 0: all)")
    doctor.set_defaults(func=cmd_doctor)
    return p


def cmd_doctor(args) -> int:
    from citegate_assets.lib.doctor import doctor, render

    settings = _settings(args)
    cfg = _load_config(settings)
    if not settings.landing.is_dir():
        raise FileNotFoundError(f"{settings.landing}: landing folder not found ({settings.sources['landing'][1]})")
    limit = args.limit if args.limit and args.limit > 0 else None
    report = doctor(settings.landing, cfg, limit=limit)
    print(render(report, settings.landing, str(cfg.path or "built-in defaults"), limit))  # render escapes logged values
    return 0 if report.ok else 1


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
    return _run(_settings(args), args.start, args.end, quiet=args.quiet, wait_s=args.wait, final=args.final)


def cmd_demo(args) -> int:
    from citegate_assets.lib.loggen import generate_logs

    settings = _settings(args)
    if settings.kind("labels") == "default":  # no flag, variable or config key: the demo's own labels
        settings = settings.with_value(
            "labels", where.demo_labels(), "demo", "the demo's labels, shipped in the package"
        )
    truth = settings.landing.parent / "demo-truth.jsonl"
    print(f"1/2 generating {args.days} days x {args.requests_per_day} requests of sample logs into {settings.landing}")
    summary = generate_logs(
        settings.landing, days=args.days, requests_per_day=args.requests_per_day, seed=args.seed, truth_path=truth
    )
    print(f"    {_short(summary)}\n    expected reasons in {truth}")
    print(f"2/2 running the pipeline into {settings.warehouse}")
    code = _run(settings, None, None, quiet=False)
    if code == 0:
        print(_next_steps(settings))
    return code


def _load_config(settings: "where.Settings"):
    """The config in force, checked (a bad key is an error that names it)."""
    from citegate_assets.lib.config import load_config, parse_config

    return load_config(settings.config) if settings.config else parse_config({}, None)


def _run(settings: "where.Settings", start, end, *, quiet: bool, wait_s: float = 0.0, final: bool = False) -> int:
    _hide_dagster_warnings()  # before anything imports the definitions
    from citegate_assets.pipeline import plan_days, run_range, within_partitions

    logs, warehouse = settings.landing, settings.warehouse
    if not logs.is_dir():
        raise FileNotFoundError(f"{logs}: landing folder not found ({settings.sources['landing'][1]})")
    cfg = _load_config(settings)  # fail fast on a bad config, naming the key
    print(safe("\n".join(settings.describe()), newlines=True))
    plan = within_partitions(plan_days(logs, warehouse, start, end), dates_given=start is not None)
    print(f"running days {plan.start} .. {plan.end} (config: {cfg.path or 'built-in defaults'})")
    if plan.note:
        print(f"note: {safe(plan.note)}")
    t0 = time.monotonic()
    result = run_range(
        plan,
        settings=settings,
        # --quiet: only the summary. Dagster logs a failed step at ERROR with its stack trace; a handled failure
        # is printed once, below, as the failing step's message and the failed checks' rows
        log_level=QUIET_LOG_LEVEL if quiet else "INFO",
        wait_s=wait_s,
        on_wait=lambda holder: print(safe(f"waiting for the run that holds {warehouse} ({holder}) …"), flush=True),
        final=final,
    )
    elapsed = time.monotonic() - t0
    if not result.success:
        _print_failure(result)
        print(f"run failed after {elapsed:.1f}s", file=sys.stderr)
        return 1
    print(f"run {result.run_id} succeeded in {elapsed:.1f}s")
    print(summarize(warehouse, plan))
    return 0


# Dagster's console logger level for --quiet: CRITICAL, so a failed step's ERROR event (with its stack trace)
# is not printed; _print_failure prints what failed instead.
QUIET_LOG_LEVEL = "CRITICAL"


def _hide_dagster_warnings() -> None:
    """The project's assets use Dagster parameters marked beta or preview (`backfill_policy`): Dagster
    warns about each at import, on every run, about Dagster's API and not about the user's data. Silenced for
    this CLI process only (pyproject's pytest filterwarnings does the same for the tests); `dagster dev` and the
    daemon keep them. Imported here, not at module level: readers (queue, metrics, trace) never load Dagster."""
    import warnings

    import dagster as dg

    for category in (dg.BetaWarning, dg.PreviewWarning):
        warnings.filterwarnings("ignore", category=category)


def cmd_calibrate(args) -> int:
    _hide_dagster_warnings()  # before anything imports the definitions
    from citegate_assets.pipeline import run_calibration

    settings = _settings(args)
    _load_config(settings)
    if args.labels is not None and not settings.labels.exists():
        raise FileNotFoundError(f"{settings.labels}: labels file or folder not found")
    print(safe("\n".join(settings.describe()), newlines=True))
    result = run_calibration(settings=settings, log_level=QUIET_LOG_LEVEL if args.quiet else args.log_level)
    if not result.success:
        _print_failure(result)
        return 1
    print(calibration_report(settings.warehouse))
    # run_calibration's last step published the copy (readers open only that one), as the nightly run's does
    print()
    print(
        safe(
            f"published {settings.published}  ({settings.sources['published'][1]}): queue, metrics, trace and "
            "review now read this calibration"
        )
    )
    return 0


def _readable(args) -> Path:
    """The published copy, the only file readers open: a run may be writing the working file, and DuckDB
    allows one writer or many readers. Without a published copy, say so; never fall back."""
    settings = _settings(args)
    published = settings.published
    if not published.exists():
        raise FileNotFoundError(
            f"{published}: no published copy ({settings.sources['published'][1]}; warehouse {settings.warehouse}, "
            f"{settings.sources['warehouse'][1]}). Readers open only the published copy, never the working file a run "
            "may be writing: run `citegate run` first (its last step publishes the copy)"
        )
    print(safe(f"reading {published}  ({settings.sources['published'][1]})"), file=sys.stderr)
    return published


def cmd_metrics(args) -> int:
    from citegate_assets.lib.metrics import HEADLINE, load_definitions, update_lock
    from citegate_assets.lib.warehouse import connect, query

    if args.lock:
        if where.source_checkout() is None:
            raise RuntimeError(
                f"`citegate metrics --lock` preregisters definitions in the project's sql/metrics/metrics.lock.json; this "
                f"citegate is an installed package ({where.sql_dir()}), whose definitions and lock must not change. "
                "Run it in a source checkout (pip install -e .), commit the lock, and build a new wheel"
            )
        added = update_lock(load_definitions())
        print("pinned: " + (", ".join(added) if added else "nothing new; every definition is already in the lock"))
        return 0
    definitions = {d.name: d for d in load_definitions()}
    with connect(_readable(args), read_only=True) as con:
        rel = query(con, "metric_tables/metrics_report", {"weeks": max(args.weeks, 1)})
        rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    print("Definitions (preregistered in sql/metrics/, pinned in sql/metrics/metrics.lock.json):")
    for name in HEADLINE:
        d = definitions[name]
        print(f"  {name} v{d.version} = {safe(d.numerator)}  /  {safe(d.denominator)}")
        print(textwrap.fill(safe(d.description), width=100, initial_indent="      ", subsequent_indent="      "))
    if not rows:
        print("\nno metrics yet: run `citegate run` first")
        return 0
    weeks = sorted({r["week_start"] for r in rows})
    for week in weeks:
        print(f"\nWeek of {week} (ISO week, Monday, UTC): value (numerator / denominator)")
        surfaces = sorted({r["surface"] for r in rows if r["week_start"] == week})
        width = max([20, *(len(ident(s)) + 2 for s in surfaces)])
        header = f"  {'surface':<{width}}" + "".join(f"{m:>26}" for m in HEADLINE)
        print(header)
        for surface in surfaces:
            cells = {r["metric"]: r for r in rows if r["week_start"] == week and r["surface"] == surface}
            print(f"  {ident(surface):<{width}}" + "".join(f"{_cell(cells.get(m)):>26}" for m in HEADLINE))
    return 0


def _cell(row: dict | None) -> str:
    if row is None:
        return "—"
    num = "?" if row["numerator"] is None else f"{row['numerator']:,.1f}".removesuffix(".0")
    value = "NULL" if row["value"] is None else f"{row['value']:.3f}"
    return f"{value} ({num}/{row['denominator']:,})"


def _num(x, places: int = 4) -> str:
    """A number for people: NULL, or rounded to `places` decimals without trailing zeros (12, 0.3333, 1204.5)."""
    if x is None:
        return "NULL"
    return f"{x:.{places}f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


def _no_cell(con, args, week) -> ValueError:
    """Why there is no such cell, listing what there is: the metrics, and a breakdown metric's values."""
    from citegate_assets.lib.warehouse import query

    rel = query(con, "metric_tables/trace_choices", {"surface": args.surface, "week": week})
    choices: dict[str, list[str]] = {}
    for metric, breakdown in rel.fetchall():
        choices.setdefault(metric, []).extend([] if breakdown is None else [breakdown])
    cell = f"surface {quote(args.surface)}, week of {week}"
    if not choices:
        return ValueError(f"no metrics for {cell} (see `citegate metrics` for the surfaces and weeks)")
    if args.metric not in choices:
        return ValueError(f"no metric {quote(args.metric)} for {cell}; its metrics: {', '.join(map(safe, choices))}")
    values = ", ".join(map(ident, choices[args.metric]))
    if not values:
        return ValueError(f"{safe(args.metric)} has no breakdowns: drop --breakdown {quote(args.breakdown)}")
    if args.breakdown is None:
        return ValueError(f"{safe(args.metric)} is a breakdown metric: give --breakdown, one of (for {cell}): {values}")
    return ValueError(
        f"no breakdown {quote(args.breakdown)} of {safe(args.metric)} for {cell}; its breakdowns: {values}"
    )


def cmd_trace(args) -> int:
    from citegate_assets.lib.warehouse import connect, query

    week = args.week - timedelta(days=args.week.weekday())  # the Monday of that ISO week
    params = {
        "metric": args.metric,
        "surface": args.surface,
        "week": week,
        "breakdown": args.breakdown,
        "limit": args.limit,
    }
    with connect(_readable(args), read_only=True) as con:
        rel = query(con, "metric_tables/trace_cell", params)
        cells = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        if not cells:
            raise _no_cell(con, args, week)
        cell = cells[0]
        [totals] = [
            dict(zip(r.columns, v)) for r in [query(con, "metric_tables/trace_totals", params)] for v in r.fetchall()
        ]
        rel = query(con, "metric_tables/trace_rows", params)
        rows = rel.limit(max(args.limit, 0)).fetchall()
    value = "NULL" if cell["value"] is None else f"{cell['value']:.4f}"
    print(
        f"{safe(cell['metric'])} v{cell['definition_version']}  surface={ident(cell['surface'])}  week of {cell['week_start']}"
        + (f"  breakdown={ident(args.breakdown)}" if args.breakdown else "")
    )
    if cell["denominator"] is None:  # a count: the value is the numerator
        print(f"  value {_num(cell['value'])}: a count (numerator {_num(cell['numerator'])}, no denominator)")
    else:
        print(f"  value {value} = numerator {_num(cell['numerator'])} / denominator {_num(cell['denominator'])}")
    print(f"  numerator:   {safe(cell['numerator_words'])}")
    print(f"  denominator: {safe(cell['denominator_words'])}")
    rows_are = "rows" if cell["denominator"] is None else "citations in the denominator,"
    print(
        f"  behind it: {totals['denominator_rows']} {rows_are} from {totals['prompts']} prompts; "
        f"{totals['numerator_rows']} count toward the numerator (sum of weights {_num(totals['numerator_sum'])})"
    )
    cw = max([28, *(len(ident(r[0])) + 2 for r in rows)])  # ids are shown escaped, so as wide as they print
    rw = max([24, *(len(ident(r[1])) + 2 for r in rows)])
    print(f"\n  {'citation_id':<{cw}}{'weight':>8}  {'request_id':<{rw}}{'prompt sha256':<18}log")
    for citation_id, request_id, weight, sha, source_file, source_line, _ in rows:
        w = "NULL" if weight is None else f"{weight:.3f}".rstrip("0").rstrip(".")
        print(
            f"  {ident(citation_id):<{cw}}{w:>8}  {ident(request_id):<{rw}}{safe(sha[:16]):<18}{safe(source_file)}:{source_line}"
        )
    if totals["denominator_rows"] > len(rows):
        print(f"  … {totals['denominator_rows'] - len(rows)} more (--limit N)")
    return 0


def cmd_queue(args) -> int:
    from citegate_assets.lib.queue_view import render_context, render_entry, render_groups, render_unlocated
    from citegate_assets.lib.warehouse import connect, query

    with connect(_readable(args), read_only=True) as con:
        if args.action == "show":
            if args.citation_id is None:
                raise ValueError("usage: citegate queue show CITATION_ID")
            rel = query(con, "review/queue_entry", {"citation_id": args.citation_id})  # the id exactly as typed
            rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
            if not rows:
                raise ValueError(
                    f"no queue entry {quote(args.citation_id)}: it passes both gates, or it is not in this "
                    f"warehouse{_did_you_mean(con, args.citation_id)}"
                )
            entry = rows[0]
            start, end = entry["found_start"], entry["found_end"]
            where = "where the span was found"
            if start is None and entry["section_start"] is not None:
                start, end, where = (
                    entry["section_start"],
                    entry["section_end"],
                    "the cited chunk's section (the span is not in it)",
                )
            elif start is None:
                start, end, where = (
                    entry["context_start"],
                    entry["context_end"],
                    "the context block (the cited chunk is not in it)",
                )
            print(render_entry(entry, passage_chars=4000))
            if start is None:  # the context block was not found: show what the profile looked for, and the prompt
                print()
                print(render_unlocated(entry, _profile_for(args, entry["template"])))
                return 0
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
    from citegate_assets.lib.reviews import append_review, make_review
    from citegate_assets.lib.warehouse import connect

    fields = dict(
        citation_id=args.citation_id, outcome=args.outcome, cause=args.cause, note=args.note, reviewer=args.reviewer
    )
    make_review(
        **fields, queue_reason="-", claim="-", passage=None
    )  # refuse a bad outcome or cause before anything else
    settings = _settings(args)
    _load_config(settings)
    with connect(_readable(args), read_only=True) as con:
        rows = con.sql(
            "select reason, claim, passage, status from citation_queue where citation_id = $id",
            params={"id": args.citation_id},
        ).fetchall()
        hint = _did_you_mean(con, args.citation_id) if not rows else ""
    if not rows:
        raise ValueError(
            f"no queue entry {quote(args.citation_id)}: see `citegate queue` for the entries (nothing was "
            f"written){hint}"
        )
    reason, claim, passage, status = rows[0]
    review = make_review(**fields, queue_reason=reason, claim=claim, passage=passage)
    if review.citation_id != args.citation_id:  # the id looked up is the id recorded, never altered
        raise RuntimeError(
            f"the review would record {quote(review.citation_id)}, not {quote(args.citation_id)}: nothing was written"
        )
    # the same resolution the run uses (lib/settings.py), so the next run of this warehouse reads it
    path = append_review(settings.reviews, review)
    print(
        f"recorded {safe(review.outcome)}{' (' + safe(review.cause) + ')' if review.cause else ''} on {ident(review.citation_id)} "
        f"by {ident(review.reviewer)} in {safe(path)}\nits status ({safe(status)} now) follows on the next run: citegate run, "
        "or the nightly schedule"
    )
    return 0


def _did_you_mean(con, typed: str) -> str:
    """A hint, never a substitute: the queue's ids that differ from the typed one only by blanks at either end
    (ids are used exactly as stored; request ids may hold spaces, so " r1#2" and "r1#2" are two citations)."""
    core = typed.strip()
    if not core:
        return ""
    near = [
        cid
        for (cid,) in con.sql(
            "select citation_id from citation_queue where contains(citation_id, $core) order by citation_id limit 200",
            params={"core": core},
        ).fetchall()
        if cid != typed and cid.strip() == core
    ][:5]
    if not near:
        return ""
    return (
        "; did you mean "
        + " or ".join(quote(cid) for cid in near)
        + "? (ids are used exactly as typed, blanks included)"
    )


def _profile_for(args, template: str | None):
    """The profile named `template`: built in, or from the config file in force (None when neither has it)."""
    from citegate_assets.lib.profiles import BUILTIN_PROFILES

    if template in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[template]
    try:
        return _load_config(_settings(args)).profile(template)
    except (ValueError, OSError):  # a bad or missing config file: the prompt is still worth showing
        return None


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
                print(
                    f"failed in {safe(event.step_key or 'the run')}: {_message(error.message)}{cause}", file=sys.stderr
                )
                printed = True
    for check in result.get_asset_check_evaluations():
        if check.passed:
            continue
        level = "warning" if check.severity.value == "WARN" else "failed"
        print(
            f"\ncheck {safe(check.asset_key.to_user_string())}.{safe(check.check_name)} {level}"
            + (f": {_message(check.description)}" if check.description else ""),
            file=sys.stderr,
        )
        for name, value in (check.metadata or {}).items():
            text = str(getattr(value, "value", value)).strip()
            if text and text != "_no rows_":  # tables of logged values: every line escaped, and indented
                print(f"  {safe(name)}:\n" + textwrap.indent(safe(text, newlines=True), "    "), file=sys.stderr)
    print(f"run {result.run_id} failed", file=sys.stderr)


def _message(text: str) -> str:
    """An error message that may quote logged values: escaped, its further lines indented under its first."""
    return textwrap.indent(safe(text.strip(), newlines=True), "    ").lstrip()


def summarize(warehouse: Path, plan=None) -> str:
    """The warehouse after a run. With the run's plan, the gate tables cover only the days it gated, and
    later days (ingested by this run, gated by the run that covers them) are named as such."""
    from citegate_assets.lib.reporting import text_table
    from citegate_assets.lib.warehouse import connect, query

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


def _days_notes(plan, days: list[tuple]) -> list[str]:
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


def _next_steps(settings: "where.Settings") -> str:
    example = where.sql_dir() / "examples" / "failures_by_reason.sql"
    flag = "" if settings.kind("warehouse") == "default" else f" --warehouse {settings.warehouse}"
    prog = (
        sys.argv[0] if Path(sys.argv[0]).name == "citegate" else "citegate"
    )  # e.g. .venv/bin/citegate under make demo
    steps = [
        (
            "make ui",
            "Dagster UI on http://127.0.0.1:3000 (Ctrl-C stops it): assets by stage, lineage, the nightly schedule",
        ),
        (
            f"{prog} queue{flag}",
            "the review queue, grouped by reason; then `citegate review ID accept|repair|escalate`",
        ),
        (
            f"{prog} metrics{flag}",
            "the four weekly numbers per surface beside their definitions; `citegate trace` for the rows",
        ),
        ("make test", "the test suite"),
        ("README.md", "the log format, the profiles, every table, where every file goes, more example queries"),
    ]
    width = max(len(cmd) for cmd, _ in steps) + 2
    query = f"python -c \"import duckdb; print(duckdb.connect('{settings.published}', read_only=True).sql(open('{example}').read()))\""
    return "\nNext:\n" + "".join(f"  {cmd:<{width}}# {what}\n" for cmd, what in steps) + f"  {query}\n"


def _short(summary: dict) -> str:
    from citegate_assets.lib.loggen import PROMPT_KEPT_KINDS

    keys = ("files", "records", "citations", "malformed_lines")
    text = ", ".join(f"{k}={summary[k]}" for k in keys if k in summary)
    kinds = summary.get("malformed_kinds") or {}
    kept = sum(kinds.get(k, 0) for k in PROMPT_KEPT_KINDS)
    if (
        summary.get("malformed_lines") and "records" in summary
    ):  # records are the valid lines; the warehouse counts prompts
        text += (
            f"\n    records are the valid lines; {kept} of the malformed lines ({', '.join(PROMPT_KEPT_KINDS)}) keep "
            f"their prompt and lose their answer, the other {summary['malformed_lines'] - kept} are rejected "
            f"(invalid, duplicate or conflicting lines): a run into an empty warehouse ingests {summary['records'] + kept} prompts"
        )
    return text


if __name__ == "__main__":
    sys.exit(main())
