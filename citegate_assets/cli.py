"""The `citegate` command line: demo, gen-logs, run."""

import argparse
import sys
import time
from datetime import date
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
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
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
    run.set_defaults(func=cmd_run)

    cal = sub.add_parser("calibrate", help="run the configured judge on the hand labels and print its false pass rate")
    cal.add_argument("--labels", type=Path, default=None, help="labels file or folder (default: [calibration].labels)")
    cal.add_argument("--warehouse", type=Path, default=DEFAULT_WAREHOUSE, help="DuckDB file (default: data/warehouse.duckdb)")
    cal.add_argument("--config", type=Path, default=None, help="citegate.toml (default: $CITEGATE_CONFIG, else the project's)")
    cal.set_defaults(func=cmd_calibrate)
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
    return _run(args.logs, args.warehouse, args.config, args.start, args.end, quiet=args.quiet)


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


def _run(logs: Path, warehouse: Path, config: Path | None, start, end, *, quiet: bool) -> int:
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
    result = run_range(plan, landing=logs, warehouse=warehouse, config_file=config, log_level="ERROR" if quiet else "INFO")
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


def calibration_report(warehouse: Path) -> str:
    from citegate_assets.lib.reporting import text_table
    from citegate_assets.lib.warehouse import connect, load_sql

    with connect(warehouse, read_only=True) as con:
        cal = con.sql(load_sql("report/calibration")).pl()
        matrix = con.sql(load_sql("report/confusion")).pl()
        gates = con.sql(load_sql("report/gate_status")).pl()
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
    from citegate_assets.lib.warehouse import connect, load_sql

    with connect(warehouse, read_only=True) as con:
        ingest = con.sql(load_sql("report/ingest_summary")).pl()
        provenance = con.sql(load_sql("report/provenance_by_surface")).pl()
        rejects = con.sql(load_sql("report/reject_reasons")).pl()
        support = con.sql(load_sql("report/support_by_surface")).pl()
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
  make test                    # the test suite
  .venv/bin/python -c "import duckdb; print(duckdb.connect('{warehouse}', read_only=True).sql(open('sql/examples/failures_by_reason.sql').read()))"
  README.md                    # the log format, the profiles, every table and more example queries
"""


def _short(summary: dict) -> str:
    keys = ("files", "records", "citations", "malformed_lines")
    return ", ".join(f"{k}={summary[k]}" for k in keys if k in summary)


if __name__ == "__main__":
    sys.exit(main())
