"""The commands that write: demo, gen-logs, run, calibrate and forget. Dagster is imported only by those that run
it (run, demo, calibrate), and only once the arguments are read."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import click

from citegate_assets.cli.options import DAY, PIPELINE_PATHS, describe, example, load_config, settings_from, shared
from citegate_assets.lib.core import paths as where
from citegate_assets.lib.core.terminal import ident, safe

# Dagster's console logger level for --quiet: CRITICAL, so a failed step's ERROR event (with its stack trace)
# is not printed; run_failure prints what failed instead.
QUIET_LOG_LEVEL = "CRITICAL"


# defs/partitions.py FIRST_DAY_ENV; named here so that setting it does not import the definitions first
FIRST_DAY_ENV = "CITEGATE_FIRST_DAY"


@contextmanager
def cli_partitions() -> Iterator[None]:
    """The daily partitions of a CLI run start where they always did for it (CITEGATE_FIRST_DAY, else January 1 of
    the previous UTC year), not at the first day of whichever warehouse the environment names (what the UI lists):
    the CLI runs the days it is given, on the warehouse it is given. Set for this process and the day processes it
    starts, before the definitions are imported, and put back after."""
    from citegate_assets.lib.core.timestamps import utc_now

    if os.environ.get(FIRST_DAY_ENV, "").strip():
        yield
        return
    os.environ[FIRST_DAY_ENV] = date(utc_now().year - 1, 1, 1).isoformat()
    try:
        yield
    finally:
        os.environ.pop(FIRST_DAY_ENV, None)


def _workers(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 1:
        raise click.BadParameter(f"--workers {text}: expected a whole number >= 1")
    return n


@click.command(epilog=example("citegate demo --days 3 --requests-per-day 50"))
@shared(*PIPELINE_PATHS, "requests_per_day", "days", "seed")
def demo(**params: Any) -> int:
    """Generate realistic sample logs and run the whole pipeline on them.

    gen-logs then run (what `make demo` runs), calibrated on labels drawn from the generated logs unless labels are
    named; then which judge ran (the screen, the LLM judge or the cascade), its false pass and recall on held-out
    real labels, the hand labels calibration read, and how to connect an LLM judge."""
    from citegate_assets.lib.loggen import PROMPT_KEPT_KINDS, generate_logs
    from citegate_assets.lib.report_view import generated_logs, next_steps

    days, per_day = params["days"], params["requests_per_day"]
    settings = settings_from(params)
    truth = settings.landing.parent / "demo-truth.jsonl"
    labels = None
    if settings.kind("labels") == "default":  # no flag, variable or config key: labels drawn from the demo's logs
        labels = settings.landing.parent / "demo-labels.jsonl"
        settings = settings.with_value(
            "labels", labels, "demo", "the demo's labels, drawn from its generated logs' truth"
        )
    print(f"1/2 generating {days} days x {per_day} requests of sample logs into {settings.landing}")
    summary = generate_logs(
        settings.landing,
        days=days,
        requests_per_day=per_day,
        seed=params["seed"],
        truth_path=truth,
        labels_path=labels,
    )
    print(f"    {generated_logs(summary, PROMPT_KEPT_KINDS)}\n    expected reasons in {truth}")
    if labels is not None:
        counts = summary["labels"]
        print(
            f"    calibration labels: {counts['yes']} faithful (yes) and {counts['no']} unfaithful (no) generated "
            f"citations, labelled by the generator's truth, in {labels}"
        )
    print(f"2/2 running the pipeline into {settings.warehouse}")
    code = run_pipeline(settings, None, None, quiet=False)
    if code == 0:
        from citegate_assets.lib.report_view import judge_report
        from citegate_assets.lib.support.judge.factory import make_tiers

        print(judge_report(settings.warehouse, make_tiers(load_config(settings).judge)))  # builds clients, no call
        flag = "" if settings.kind("warehouse") == "default" else f" --warehouse {settings.warehouse}"
        prog = sys.argv[0] if Path(sys.argv[0]).name == "citegate" else "citegate"  # e.g. .venv/bin/citegate
        print(next_steps(prog, flag, settings.published, where.sql_dir() / "examples" / "failures_by_reason.sql"))
    return code


@click.command("gen-logs", epilog=example("citegate gen-logs --out data/landing --days 2 --truth data/truth.jsonl"))
@shared("out", "days", "requests_per_day", "seed")
@click.option(
    "--start", type=DAY, default="2026-11-02", metavar="DATE", help="first day (UTC), YYYY-MM-DD (default 2026-11-02)"
)
@click.option("--prompt-kb", type=int, default=None, metavar="KB", help="pad prompts to about this many KB")
@click.option(
    "--truth",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="also write the expected reason of every citation here",
)
@click.option("--no-malformed", is_flag=True, help="write only valid lines")
def gen_logs(
    out: Path,
    days: int,
    requests_per_day: int,
    seed: int,
    start: date,
    prompt_kb: int | None,
    truth: Path | None,
    no_malformed: bool,
) -> int:
    """Write citegate-log/1 sample files (deterministic per seed)."""
    from citegate_assets.lib.loggen import PROMPT_KEPT_KINDS, generate_logs
    from citegate_assets.lib.report_view import generated_logs

    t0 = time.monotonic()
    summary = generate_logs(
        out,
        days=days,
        requests_per_day=requests_per_day,
        seed=seed,
        start_date=start.isoformat(),
        truth_path=truth,
        malformed=not no_malformed,
        prompt_kb=prompt_kb,
    )
    print(f"wrote {out} in {time.monotonic() - t0:.1f}s: {generated_logs(summary, PROMPT_KEPT_KINDS)}")
    return 0


@click.command(epilog=example("citegate run --quiet", "citegate run --start 2026-11-02 --end 2026-11-08 --workers 2"))
@shared(*PIPELINE_PATHS)
@click.option(
    "--start",
    type=DAY,
    default=None,
    metavar="DATE",
    help="first day to run, YYYY-MM-DD (default: first day in the logs)",
)
@shared("end", "quiet")
@click.option(
    "--final",
    is_flag=True,
    help="every landing file is finished: read an unterminated last line too (default: hold it back until the file "
    "has not changed for [ingest].settle_seconds)",
)
@click.option(
    "--wait",
    type=float,
    default=0.0,
    metavar="SECONDS",
    help="if another run holds the warehouse, wait up to this many seconds (default: stop at once)",
)
@click.option(
    "--workers",
    type=_workers,
    default=None,
    metavar="N",
    help="over several days: N day partitions at once, each its own run (ingest first, the metrics and the publish "
    "last); over one day: processes for ingest's parsing and the offline judge (default: [ingest] and [judge] "
    "workers of citegate.toml, 0 = one per core, at most 4)",
)
@click.option(
    "--shards",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="split ingest's landing files across N shard processes by file identity, each staging its rows in the "
    "lake, one step loading them (default: [ingest] shards of citegate.toml, 1)",
)
def run(**params: Any) -> int:
    """Materialize every daily partition of the landing folder (what the nightly schedule does), then print the
    summary.

    --workers N over several days: first ingest and the unpartitioned assets the days read (one run), then one run
    per day, N at a time, then the metrics and the publish (one run), each tagged citegate/phase head, day or tail;
    the judge's steps share the citegate_judge pool, whose limit it sets to N. Over one day: the processes for
    ingest's parsing, the offline judge and the numeric check. Results are identical with any N, and every process
    it starts exits when citegate dies, kill -9 included.

    The runs are recorded in the Dagster home: from the project folder on its default warehouse that is the
    project's dagster_home/, the one `make ui` shows."""
    return run_pipeline(
        settings_from(params),
        params["start"],
        params["end"],
        quiet=params["quiet"],
        wait_s=params["wait"],
        final=params["final"],
        workers=params["workers"],
        shards=params["shards"],
    )


def run_pipeline(
    settings: where.Settings,
    start: date | None,
    end: date | None,
    *,
    quiet: bool,
    wait_s: float = 0.0,
    final: bool = False,
    workers: int | None = None,
    shards: int | None = None,
) -> int:
    with cli_partitions():
        return _run_pipeline(
            settings, start, end, quiet=quiet, wait_s=wait_s, final=final, workers=workers, shards=shards
        )


def _run_pipeline(
    settings: where.Settings,
    start: date | None,
    end: date | None,
    *,
    quiet: bool,
    wait_s: float,
    final: bool,
    workers: int | None,
    shards: int | None = None,
) -> int:
    from citegate_assets.dagster_warnings import hide_dagster_warnings

    hide_dagster_warnings()  # before anything imports the definitions
    from citegate_assets.lib.report_view import run_failure, summarize
    from citegate_assets.lib.storage.text_store import missing_text_folder
    from citegate_assets.pipeline import plan_days, run_range, within_partitions

    logs, warehouse = settings.landing, settings.warehouse
    if not logs.is_dir():
        raise FileNotFoundError(f"{logs}: landing folder not found ({settings.sources['landing'][1]})")
    cfg = load_config(settings)  # fail fast on a bad config, naming the key
    if (text := missing_text_folder(warehouse)) is not None:
        raise FileNotFoundError(
            f"{warehouse}: its text folder {text} is missing: the prompts' text is stored there, and a run would find "
            "every stored prompt changed. Was the warehouse moved or copied without it? Move the folder back beside "
            "the warehouse (with its .lake folder)"
        )
    print(describe(settings))
    plan = within_partitions(plan_days(logs, warehouse, start, end, config=cfg), dates_given=start is not None)
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
        workers=workers,
        shards=shards,
        say=None if quiet else (lambda text: print(text, flush=True)),
    )
    elapsed = time.monotonic() - t0
    if not result.success:
        print(run_failure(result), file=sys.stderr)
        print(f"run failed after {elapsed:.1f}s", file=sys.stderr)
        return 1
    print(f"run {result.run_id} succeeded in {elapsed:.1f}s")
    print(summarize(warehouse, plan))
    return 0


@click.command(epilog=example("citegate calibrate --labels labels/ --quiet"))
@shared("labels", "warehouse", "config", "published", "dagster_home", "lake", "quiet")
@click.option(
    "--log-level",
    default="WARNING",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
    metavar="LEVEL",
    help="Dagster's console log level: DEBUG, INFO, WARNING or ERROR (default WARNING: warnings and errors only)",
)
def calibrate(**params: Any) -> int:
    """Run the configured judge on the hand labels, print its false pass rate and publish the copy readers open."""
    from citegate_assets.dagster_warnings import hide_dagster_warnings

    hide_dagster_warnings()  # before anything imports the definitions
    from citegate_assets.lib.report_view import calibration_report, run_failure

    settings = settings_from(params)
    load_config(settings)
    if params["labels"] is not None and not settings.labels.exists():
        raise FileNotFoundError(f"{settings.labels}: labels file or folder not found")
    print(describe(settings))
    log_level = QUIET_LOG_LEVEL if params["quiet"] else params["log_level"]
    with cli_partitions():
        from citegate_assets.pipeline import run_calibration

        result = run_calibration(settings=settings, log_level=log_level)
    if not result.success:
        print(run_failure(result), file=sys.stderr)
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


@click.command(epilog=example('citegate forget --request-id acme-0004 acme-0007 --why "customer request 1182"'))
@click.option(
    "--request-id", "request_ids", multiple=True, required=True, metavar="ID", help="request ids (one or more)"
)
@click.argument("more_request_ids", nargs=-1, metavar="[ID]...")
@click.option("--why", default=None, help="the reason, recorded in the audit row (forgotten_requests)")
@click.option("--by", default=None, metavar="NAME", help="who asked, recorded in the audit row (default: $USER)")
@shared("warehouse", "config", "published", "lake")
def forget(**params: Any) -> int:
    """Remove requests' prompt, chunk and answer text everywhere citegate holds it, published copy and lake
    included, leaving an audit row (docs/retention.md).

    Prints the landing files and lines that still hold them, rejected lines included."""
    from citegate_assets.lib.core.timestamps import utc_now
    from citegate_assets.lib.retention.forget import forget as forget_requests
    from citegate_assets.lib.retention.forget import forgetter

    settings = settings_from(params)
    load_config(settings)
    print(describe(settings))
    result = forget_requests(
        settings.warehouse,
        settings.published,
        settings.lake,
        [*params["request_ids"], *params["more_request_ids"]],
        by=forgetter(params["by"]),
        reason=params["why"],
        now=utc_now(),
    )
    for request_id, rows in result.forgotten.items():
        touched = ", ".join(f"{table} {n}" for table, n in rows.items() if n) or "no text left"
        print(f"forgotten {ident(request_id)}: {touched}")
    for pointer in result.pointers:
        where_from = {"review": "the reviews log", "own label": "the labels folder"}.get(
            pointer.what, "the landing folder (the producer's)"
        )
        print(
            f"  still in {where_from}: {safe(pointer.file)} line {pointer.line} ({pointer.what} of "
            f"{ident(pointer.request_id)}): remove it there; re-ingesting it will not bring the text back"
        )
    if result.published is not None:
        print(
            safe(
                f"published {result.published['path']} without it; {len(result.removed_files)} superseded lake "
                "files deleted at once: a reader still holding the previous published copy may lose its data "
                "(reopen the published copy)"
            )
        )
    if result.rewrite is not None:
        done = result.rewrite
        print(
            safe(
                f"rewrote {done.path} without the freed blocks that held it ({done.bytes_before / 1e6:,.1f} -> "
                f"{done.bytes_after / 1e6:,.1f} MB, {done.seconds:.1f} s)"
            )
        )
    for request_id in result.unknown:
        print(f"citegate: error: unknown request id {ident(request_id)}: nothing stored under it", file=sys.stderr)
    return 1 if result.unknown else 0


COMMANDS = (demo, gen_logs, run, calibrate, forget)
