"""The `citegate` command line: demo, gen-logs, run, calibrate, label, queue, review, metrics, trace, doctor, import,
estimate, serve, forget.

Argument parsing and dispatch only: an option that several commands take is declared once, in OPTIONS,
and added to each of them; the reports are rendered by lib/report_view.py, lib/metrics_view.py and lib/queue_view.py,
and their SQL lives in sql/. Every path comes from citegate_assets.lib.settings (flag, then environment,
then config file, then default); the writers print what they resolved, and exactly that goes into the run.
Dagster is imported only by the commands that run it (run, demo, calibrate): the readers start fast."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from citegate_assets.lib import settings as where
from citegate_assets.lib.label_log import DEFAULT_SEED as DEFAULT_LABEL_SEED
from citegate_assets.lib.label_log import DEFAULT_SIZE as DEFAULT_LABEL_SIZE
from citegate_assets.lib.terminal import ident, quote, safe

if TYPE_CHECKING:
    import duckdb

    from citegate_assets.lib.config import Config
    from citegate_assets.lib.profiles import Profile


@dataclass(frozen=True)
class Option:
    """One command-line option: declared once, in OPTIONS, and added to every command that takes it."""

    flags: tuple[str, ...]
    keywords: Mapping[str, Any]


# What each path is, for every command that takes it (the default and its precedence are appended).
_PATH_HELP = {
    "config": "citegate.toml",
    "landing": "landing folder of citegate-log/1 files, which demo writes",
    "warehouse": "the working DuckDB file: run, demo and calibrate write it, creating it if missing; "
    "queue, metrics, trace and review read its published copy",
    "published": "the read-only published copy, the only file queue, metrics, trace and review open",
    "reviews": "reviews log folder, which review appends to and run reads",
    "labels": "hand labels, a file or a folder (label and serve append own labels to own-labels.jsonl in a folder); "
    "demo draws labels from its generated logs' truth when no flag, variable or config file names them",
    "dagster_home": "Dagster instance folder",
    "lake": "the Delta tables, partitioned by day, the published copy's views read (run writes them): a folder, "
    "or s3://bucket/prefix (docs/object-storage.md)",
}


def _path_option(name: str) -> Option:
    """A path flag with its place in the one precedence (see lib/settings.py, README "Where every file goes")."""
    config_key = ", else [%s].%s" % where.CONFIG_KEYS[name] if name in where.CONFIG_KEYS else ""
    default = "./citegate.toml if present" if name == "config" else where.DEFAULTS[name]
    text = f"{_PATH_HELP[name]} (default: ${where.ENV[name]}{config_key}, else {default})"
    return Option(
        (where.FLAGS[name],),
        {"type": Path, "default": None, "dest": name, "metavar": "PATH", "help": text.replace("%", "%%")},
    )


OPTIONS: dict[str, Option] = {
    **{name: _path_option(name) for name in where.NAMES},
    "days": Option(
        ("--days",), {"type": int, "default": 14, "help": "days of sample logs, one file a day (default 14)"}
    ),
    "requests_per_day": Option(
        ("--requests-per-day",), {"type": int, "default": 300, "help": "sample requests per day (default 300)"}
    ),
    "seed": Option(("--seed",), {"type": int, "default": 7, "help": "the same seed writes the same logs (default 7)"}),
    "trace_format": Option(
        ("--from",),
        {
            "dest": "trace_format",
            "required": True,
            "metavar": "FORMAT",
            "help": 'the file\'s trace format: otlp | openinference | langfuse | anthropic (README "Trace formats")',
        },
    ),
    "out": Option(
        ("--out",),
        {
            "type": Path,
            "required": True,
            "metavar": "DIR",
            "help": "folder to write into, created if missing (gen-logs: the landing folder; import: its "
            "citegate-log/1 file, never overwritten)",
        },
    ),
    "end": Option(
        ("--end",),
        {
            "type": date.fromisoformat,
            "default": None,
            "help": "last day, inclusive, YYYY-MM-DD (default: run: the last complete day in the logs; "
            "estimate: the last day in the published copy)",
        },
    ),
    "quiet": Option(
        ("--quiet",),
        {
            "action": "store_true",
            "help": "print only citegate's own lines (the paths, the summary or report), no Dagster log lines",
        },
    ),
    "reason": Option(
        ("--reason",),
        {
            "default": None,
            "help": "only this reason (queue: e.g. span_truncated, support_partial; rejects: e.g. missing_field)",
        },
    ),
    # `citegate serve` (issue 17): the review web page
    "host": Option(
        ("--host",),
        {"default": "127.0.0.1", "help": "address to listen on (default 127.0.0.1: this machine only)"},
    ),
    "port": Option(("--port",), {"type": int, "default": 8080, "help": "port to listen on (default 8080)"}),
    "auth": Option(
        ("--auth",),
        {
            "default": "local",
            "choices": ["local", "proxy", "tokens"],
            "help": "who is reviewing: local (the page asks the name once, kept in a signed cookie), proxy (a "
            "trusted reverse proxy sets --auth-header), tokens (per-reviewer tokens in --tokens) (default local)",
        },
    ),
    "auth_header": Option(
        ("--auth-header",),
        {
            "default": "X-Forwarded-User",
            "metavar": "NAME",
            "help": "with --auth proxy: the header the proxy sets to the reviewer's name; only the proxy may reach "
            "the port (default X-Forwarded-User)",
        },
    ),
    "tokens": Option(
        ("--tokens",),
        {
            "type": Path,
            "default": None,
            "metavar": "FILE",
            "help": "with --auth tokens: a 0600 file of `NAME TOKEN` lines, one per reviewer",
        },
    ),
}


def _add(parser: argparse.ArgumentParser, *names: str) -> None:
    for name in names:
        option = OPTIONS[name]
        parser.add_argument(*option.flags, **option.keywords)


def _settings(args: argparse.Namespace, **overrides: Any) -> where.Settings:
    flags = {name: getattr(args, name, None) for name in where.NAMES}
    return where.resolve(**{**flags, **overrides})


def main(argv: list[str] | None = None) -> int:
    from citegate_assets.lib.private import private_umask

    private_umask()  # everything a command writes holds prompt text
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)  # each cmd_* returns its exit code
        return code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, RuntimeError, OSError) as exc:
        print(f"citegate: error: {safe(exc)}", file=sys.stderr)  # messages may quote logged values
        return 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="citegate", description="Audit RAG citations against the prompts that were really sent."
    )
    sub = p.add_subparsers(title="commands")

    demo = sub.add_parser("demo", help="generate realistic sample logs and run the whole pipeline on them")
    _add(demo, "landing", "warehouse", "config", "published", "reviews", "labels", "dagster_home", "lake")
    _add(demo, "requests_per_day", "days", "seed")
    demo.set_defaults(func=cmd_demo)

    gen = sub.add_parser("gen-logs", help="write citegate-log/1 sample files (deterministic per seed)")
    _add(gen, "out", "days", "requests_per_day", "seed")
    gen.add_argument("--start", type=date.fromisoformat, default=date(2026, 11, 2), help="first day (UTC), YYYY-MM-DD")
    gen.add_argument("--prompt-kb", type=int, default=None, help="pad prompts to about this many KB")
    gen.add_argument("--truth", type=Path, default=None, help="also write the expected reason of every citation here")
    gen.add_argument("--no-malformed", action="store_true", help="write only valid lines")
    gen.set_defaults(func=cmd_gen_logs)

    run = sub.add_parser(
        "run", help="materialize every daily partition of the landing folder (what the nightly schedule does)"
    )
    _add(run, "landing", "warehouse", "config", "published", "reviews", "labels", "dagster_home", "lake")
    run.add_argument(
        "--start",
        type=date.fromisoformat,
        default=None,
        help="first day to run, YYYY-MM-DD (default: first day in the logs)",
    )
    _add(run, "end")
    _add(run, "quiet")
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
    run.add_argument(
        "--workers",
        type=_workers,
        default=None,
        help="over several days: N day partitions at once, each its own run (ingest first, the metrics and the "
        "publish last); over one day: processes for ingest's parsing and the offline judge (default: [ingest] and "
        "[judge] workers of citegate.toml, 0 = one per core, at most 4)",
    )
    run.set_defaults(func=cmd_run)

    cal = sub.add_parser(
        "calibrate",
        help="run the configured judge on the hand labels, print its false pass rate and publish the copy readers open",
    )
    _add(cal, "labels", "warehouse", "config", "published", "dagster_home", "lake", "quiet")
    cal.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="Dagster's console log level (default WARNING: warnings and errors only)",
    )
    cal.set_defaults(func=cmd_calibrate)

    forget = sub.add_parser(
        "forget",
        help="remove requests' prompt, chunk and answer text everywhere citegate holds it, published copy and "
        "lake included, leaving an audit row (docs/retention.md)",
    )
    forget.add_argument("--request-id", nargs="+", required=True, dest="request_ids", metavar="ID", help="request ids")
    forget.add_argument(
        "--why", default=None, dest="why", help="the reason, recorded in the audit row (forgotten_requests)"
    )
    forget.add_argument("--by", default=None, help="who asked, recorded in the audit row (default: $USER)")
    _add(forget, "warehouse", "config", "published", "lake")
    forget.set_defaults(func=cmd_forget)

    queue = sub.add_parser(
        "queue", help="the review queue, grouped by reason (`citegate queue show CITATION_ID` for one entry)"
    )
    queue.add_argument("action", nargs="?", choices=["show"], help="show one entry with the prompt around its span")
    queue.add_argument("citation_id", nargs="?", help="with `show`: the entry's citation id")
    _add(queue, "reason")
    queue.add_argument("--surface", default=None, help="only this surface")
    queue.add_argument(
        "--status",
        default=None,
        choices=["open", "accepted", "repaired", "escalated"],
        help="only entries with this status",
    )
    queue.add_argument("--limit", type=int, default=3, help="entries shown per reason group (default 3)")
    _add(queue, "warehouse", "published")
    queue.set_defaults(func=cmd_queue)

    review = sub.add_parser("review", help="record a decision on a queue entry (appends to the reviews log)")
    review.add_argument("citation_id")
    review.add_argument(
        "outcome", help="accept (the gate was too strict) | repair (fix the answer) | escalate (fix the cause)"
    )
    review.add_argument("--cause", default=None, help="escalate: chunking | truncation | ranking | other")
    review.add_argument("--note", default=None)
    review.add_argument("--reviewer", default=None, help="default: $CITEGATE_REVIEWER, else your user name")
    _add(review, "warehouse", "published", "config", "reviews")
    review.set_defaults(func=cmd_review)

    label = sub.add_parser(
        "label",
        help="label a seeded, stratified sample of this warehouse's own citations, blind (the passage and the claim "
        "only), into the labels folder: what a support gate is enforced on",
    )
    label.add_argument("--labeller", default=None, help="your name (default: $CITEGATE_REVIEWER, else your user name)")
    label.add_argument(
        "--sample-seed",
        type=int,
        default=DEFAULT_LABEL_SEED,
        help=f"the sample's seed: the same seed draws the same pairs (default {DEFAULT_LABEL_SEED})",
    )
    label.add_argument(
        "--sample-size",
        type=int,
        default=DEFAULT_LABEL_SIZE,
        help=f"pairs per surface (default {DEFAULT_LABEL_SIZE})",
    )
    _add(label, "warehouse", "published", "config", "labels")
    label.set_defaults(func=cmd_label)

    metrics = sub.add_parser(
        "metrics", help="the weekly numbers per surface (four rates and the unjudged share), each beside its definition"
    )
    metrics.add_argument("--weeks", type=int, default=4, help="how many recent weeks (default 4)")
    _add(metrics, "warehouse", "published")
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
    _add(trace, "warehouse", "published")
    trace.set_defaults(func=cmd_trace)

    rejects = sub.add_parser(
        "rejects", help="the rejected lines: file:line, reason and detail (exit 1 when there are any)"
    )
    rejects.add_argument("--file", default=None, help="only this landing file's rejects (its name)")
    _add(rejects, "reason")
    rejects.add_argument("--limit", type=int, default=50, help="rows shown (default 50)")
    _add(rejects, "warehouse", "published")
    rejects.set_defaults(func=cmd_rejects)

    doctor = sub.add_parser(
        "doctor", help="does each surface's template fit its prompts? (reads the logs only, no warehouse)"
    )
    _add(doctor, "landing", "config")
    doctor.add_argument("--limit", type=int, default=1000, help="records examined per surface (default 1000; 0: all)")
    doctor.set_defaults(func=cmd_doctor)

    imp = sub.add_parser(
        "import",
        help="convert one trace file (OpenTelemetry, OpenInference, Langfuse, Anthropic) to citegate-log/1 lines, "
        "to look at before it lands",
    )
    imp.add_argument("file", type=Path, metavar="FILE", help="the trace file (.json, .jsonl, or either gzipped)")
    _add(imp, "trace_format", "out", "config")
    imp.set_defaults(func=cmd_import)

    est = sub.add_parser(
        "estimate",
        help="before a backfill: the citations the judge would see, those already cached, and the tokens and cost per "
        "judge model and mode (calls nothing; reads the published copy)",
    )
    est.add_argument(
        "--start", type=date.fromisoformat, default=None, help="first day, YYYY-MM-DD (default: first day in the copy)"
    )
    _add(est, "end")
    _add(est, "warehouse", "published", "config")
    est.set_defaults(func=cmd_estimate)

    serve = sub.add_parser(
        "serve",
        help="the review web page: the queue, each entry, decisions (to the reviews log) and the weekly metrics; "
        "reads the published copy",
    )
    _add(
        serve, "warehouse", "published", "config", "reviews", "labels", "host", "port", "auth", "auth_header", "tokens"
    )
    serve.set_defaults(func=cmd_serve)
    return p


def cmd_serve(args: argparse.Namespace) -> int:
    """The review web page (citegate_assets/review_web, docs/review-web.md) under uvicorn, until interrupted."""
    import uvicorn

    from citegate_assets.review_web.app import ServeOptions, create_app
    from citegate_assets.review_web.auth import check_access_token, new_access_token
    from citegate_assets.review_web.server import ServerLimits, server_config

    settings = _settings(args)
    page = _load_config(settings).review_page
    given = os.environ.get("CITEGATE_REVIEW_TOKEN")
    access_token = None
    if args.auth == "local":
        access_token = check_access_token(given, "CITEGATE_REVIEW_TOKEN") if given else new_access_token()
    limits = ServerLimits(
        max_connections=page.max_connections,
        head_timeout_s=page.head_timeout_s,
        keep_alive_s=page.keep_alive_s,
        body_timeout_s=page.body_timeout_s,
    )
    options = ServeOptions(
        auth=args.auth,
        auth_header=args.auth_header,
        tokens=args.tokens,
        host=args.host,
        access_token=access_token,
        session_idle_s=page.session_idle_minutes * 60,
        session_max_s=page.session_max_hours * 3600,
        limits=limits,
    )
    app = create_app(settings, options)
    config = server_config(app, args.host, args.port, limits)
    print(safe("\n".join(settings.describe()), newlines=True))
    if args.host not in ("127.0.0.1", "localhost", "::1") and args.auth == "local":
        print(
            f"warning: listening on {safe(args.host)} with --auth local: whoever has the URL below can review under "
            "any name, and it crosses the network in clear; use --auth proxy or --auth tokens for a team",
            file=sys.stderr,
        )
    url = f"http://{safe(args.host)}:{args.port}/"
    if args.auth != "local":
        print(f"review page: {url}  (auth: {args.auth}; Ctrl-C stops it)", flush=True)
    elif given:
        print(f"review page: {url}?token=<CITEGATE_REVIEW_TOKEN>  (auth: local; Ctrl-C stops it)", flush=True)
    else:
        # the one place the access token is shown: whoever opens this URL can review, so it is for you alone
        print(
            f"review page: {url}?token={access_token}  (auth: local: open this URL to sign in; it is for you alone, "
            "and a new one is made at each start; Ctrl-C stops it)",
            flush=True,
        )
    uvicorn.Server(config).run()
    return 0


def cmd_estimate(args: argparse.Namespace) -> int:
    """What judging the days would take, from the published copy (the sampling policy and judge of the config in
    force), without calling the judge: lib/estimate.py."""
    from citegate_assets.lib.estimate import default_range, estimate, render
    from citegate_assets.lib.judge.factory import effective_judge_config, make_secondary_judge, make_tiers
    from citegate_assets.lib.warehouse import connect

    cfg = _load_config(_settings(args))
    judge_cfg = effective_judge_config(cfg.judge)
    tiers = make_tiers(judge_cfg)  # builds the clients only: no call
    configured = (tiers.llm or tiers.screen).model  # type: ignore[union-attr]
    models = {configured: not judge_cfg.base_url, **{m: False for m in cfg.judge.prices if m != configured}}
    second = cfg.judge.secondary
    candidate = make_secondary_judge(cfg.judge, primary_base_url=judge_cfg.base_url)  # no call either
    secondary = (
        None if second is None or candidate is None else (candidate.model, not (second.base_url or second.model))
    )
    if args.start and args.end and args.end < args.start:
        raise ValueError(f"--end {args.end} is before --start {args.start}")
    with connect(_readable(args), read_only=True) as con:
        found = default_range(con)
        if found is None and (args.start is None or args.end is None):
            raise ValueError("the published copy holds no citations: give --start and --end, or run first")
        start = args.start or (found[0] if found else args.start)
        end = args.end + timedelta(days=1) if args.end else (found[1] if found else start)
        screen = tiers.screen if tiers.tier == "cascade" else None  # the LLM counts only what it leaves
        result = estimate(con, cfg, start, end, models, configured, secondary, screen=screen)
    print(render(result, start, end, configured, judge_cfg.mode))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """What ingest would make of one trace file, written out: each call's record as a citegate-log/1 line (in
    source order), and every reject printed with its source line. Exit 0 when nothing was rejected, else 1."""
    from citegate_assets.lib.adapters import Call, convert_file, record_line
    from citegate_assets.lib.records import Reject, parse_line
    from citegate_assets.lib.timestamps import utc_now

    cfg = _load_config(_settings(args))
    source: Path = args.file
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such file")
    stem = source.name.removesuffix(".gz")
    stem = stem.removesuffix(".jsonl").removesuffix(".json")
    target = args.out / f"{stem}.jsonl"
    if target.exists():
        raise FileExistsError(f"{target} exists; nothing was written (remove it, or choose another --out)")
    conv = convert_file(
        source,
        cfg.adapters.settings(),
        format=args.trace_format,
        max_file_bytes=cfg.adapters.max_file_bytes,
        max_line_bytes=cfg.ingest.max_line_bytes,
        max_inflated_bytes=cfg.ingest.max_decompressed_bytes,
    )
    if conv.error is not None:
        raise RuntimeError(f"{source.name}: {conv.error}; nothing was written")
    now = utc_now()
    written: list[bytes] = []
    rejected = 0
    for item in conv.items:
        where_ = f"{source.name}:{item.line_no}"
        if isinstance(item, Call) and item.reason is None:
            raw, problem = record_line(item)
            if raw is None:
                rejected += 1
                print(safe(f"{where_}: adapter_error: {problem}"), file=sys.stderr)
                continue
            written.append(raw)
            checked = parse_line(raw.decode("utf-8", "surrogateescape"), now)
            if isinstance(checked, Reject):
                print(safe(f"{where_}: written, but ingest will reject it: {checked.reason}: {checked.detail}"))
            continue
        rejected += 1
        rid = f" ({ident(item.request_id)})" if isinstance(item, Call) and item.request_id else ""
        print(safe(f"{where_}: {item.reason}{rid}: {item.detail or ''}"), file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as fh:
        fh.writelines(line + b"\n" for line in written)
    print(safe(conv.describe()))
    print(safe(f"wrote {target}: {len(written)} calls written, {rejected} rejected"), flush=True)
    return 1 if rejected else 0


def cmd_rejects(args: argparse.Namespace) -> int:
    from citegate_assets.lib.rejects_view import render_rejects
    from citegate_assets.lib.warehouse import connect, query

    params = {"file": args.file, "reason": args.reason, "limit": max(args.limit, 0)}
    with connect(_readable(args), read_only=True) as con:
        rows = query(con, "report/rejects_list", params).fetchall()
        [(count,)] = query(con, "report/rejects_count", params).fetchall()
    filters = "".join(
        f" with {name} {quote(value)}" for name, value in (("file", args.file), ("reason", args.reason)) if value
    )
    print(render_rejects(rows, count, filters))
    return 1 if count else 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from citegate_assets.lib.doctor import doctor, render

    settings = _settings(args)
    cfg = _load_config(settings)
    if not settings.landing.is_dir():
        raise FileNotFoundError(f"{settings.landing}: landing folder not found ({settings.sources['landing'][1]})")
    limit = args.limit if args.limit and args.limit > 0 else None
    report = doctor(settings.landing, cfg, limit=limit)
    print(render(report, settings.landing, str(cfg.path or "built-in defaults"), limit))  # render escapes logged values
    return 0 if report.ok and not report.reading.reject_rows else 1  # lines that would be rejected: 1


def cmd_gen_logs(args: argparse.Namespace) -> int:
    from citegate_assets.lib.loggen import PROMPT_KEPT_KINDS, generate_logs
    from citegate_assets.lib.report_view import generated_logs

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
    print(f"wrote {args.out} in {time.monotonic() - t0:.1f}s: {generated_logs(summary, PROMPT_KEPT_KINDS)}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    return _run(
        _settings(args),
        args.start,
        args.end,
        quiet=args.quiet,
        wait_s=args.wait,
        final=args.final,
        workers=args.workers,
    )


def _workers(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 1:
        raise argparse.ArgumentTypeError(f"--workers {text}: expected a whole number >= 1")
    return n


def cmd_demo(args: argparse.Namespace) -> int:
    from citegate_assets.lib.loggen import PROMPT_KEPT_KINDS, generate_logs
    from citegate_assets.lib.report_view import generated_logs, next_steps

    settings = _settings(args)
    truth = settings.landing.parent / "demo-truth.jsonl"
    labels = None
    if settings.kind("labels") == "default":  # no flag, variable or config key: labels drawn from the demo's logs
        labels = settings.landing.parent / "demo-labels.jsonl"
        settings = settings.with_value(
            "labels", labels, "demo", "the demo's labels, drawn from its generated logs' truth"
        )
    print(f"1/2 generating {args.days} days x {args.requests_per_day} requests of sample logs into {settings.landing}")
    summary = generate_logs(
        settings.landing,
        days=args.days,
        requests_per_day=args.requests_per_day,
        seed=args.seed,
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
    code = _run(settings, None, None, quiet=False)
    if code == 0:
        from citegate_assets.lib.judge.factory import make_tiers
        from citegate_assets.lib.report_view import judge_report

        print(judge_report(settings.warehouse, make_tiers(_load_config(settings).judge)))  # builds clients, no call
        flag = "" if settings.kind("warehouse") == "default" else f" --warehouse {settings.warehouse}"
        prog = sys.argv[0] if Path(sys.argv[0]).name == "citegate" else "citegate"  # e.g. .venv/bin/citegate
        print(next_steps(prog, flag, settings.published, where.sql_dir() / "examples" / "failures_by_reason.sql"))
    return code


def _load_config(settings: where.Settings) -> Config:
    """The config in force, checked (a bad key is an error that names it)."""
    from citegate_assets.lib.config import load_config, parse_config

    return load_config(settings.config) if settings.config else parse_config({}, None)


def _run(
    settings: where.Settings,
    start: date | None,
    end: date | None,
    *,
    quiet: bool,
    wait_s: float = 0.0,
    final: bool = False,
    workers: int | None = None,
) -> int:
    _hide_dagster_warnings()  # before anything imports the definitions
    from citegate_assets.lib.report_view import run_failure, summarize
    from citegate_assets.pipeline import plan_days, run_range, within_partitions

    logs, warehouse = settings.landing, settings.warehouse
    if not logs.is_dir():
        raise FileNotFoundError(f"{logs}: landing folder not found ({settings.sources['landing'][1]})")
    cfg = _load_config(settings)  # fail fast on a bad config, naming the key
    print(safe("\n".join(settings.describe()), newlines=True))
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


# Dagster's console logger level for --quiet: CRITICAL, so a failed step's ERROR event (with its stack trace)
# is not printed; run_failure prints what failed instead.
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


def cmd_calibrate(args: argparse.Namespace) -> int:
    _hide_dagster_warnings()  # before anything imports the definitions
    from citegate_assets.lib.report_view import calibration_report, run_failure
    from citegate_assets.pipeline import run_calibration

    settings = _settings(args)
    _load_config(settings)
    if args.labels is not None and not settings.labels.exists():
        raise FileNotFoundError(f"{settings.labels}: labels file or folder not found")
    print(safe("\n".join(settings.describe()), newlines=True))
    result = run_calibration(settings=settings, log_level=QUIET_LOG_LEVEL if args.quiet else args.log_level)
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


def cmd_forget(args: argparse.Namespace) -> int:
    from citegate_assets.lib.forget import forget, forgetter
    from citegate_assets.lib.timestamps import utc_now

    settings = _settings(args)
    _load_config(settings)
    print(safe("\n".join(settings.describe()), newlines=True))
    result = forget(
        settings.warehouse,
        settings.published,
        settings.lake,
        args.request_ids,
        by=forgetter(args.by),
        reason=args.why,
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


def _readable(args: argparse.Namespace) -> Path:
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


def cmd_metrics(args: argparse.Namespace) -> int:
    from citegate_assets.lib.metrics import load_definitions, update_lock
    from citegate_assets.lib.metrics_view import render_metrics
    from citegate_assets.lib.reporting import gate_summary
    from citegate_assets.lib.warehouse import connect, query

    if args.lock:
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
    with connect(_readable(args), read_only=True) as con:
        rel = query(con, "metric_tables/metrics_report", {"weeks": max(args.weeks, 1)})
        rows = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        gates = query(con, "support/gate_status_rows")
        line = gate_summary([dict(zip(gates.columns, r)) for r in gates.fetchall()])
    print(render_metrics(definitions, rows))
    print(f"\n{line}")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from citegate_assets.lib.metrics_view import no_cell, render_trace
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
            choices: dict[str, list[str]] = {}
            for metric, breakdown in query(con, "metric_tables/trace_choices", params).fetchall():
                choices.setdefault(metric, []).extend([] if breakdown is None else [breakdown])
            raise ValueError(no_cell(choices, args.metric, args.surface, week, args.breakdown))
        rel = query(con, "metric_tables/trace_totals", params)
        [totals] = [dict(zip(rel.columns, v)) for v in rel.fetchall()]
        rows = query(con, "metric_tables/trace_rows", params).limit(max(args.limit, 0)).fetchall()
    print(render_trace(cells[0], totals, rows, args.breakdown))
    return 0


def cmd_queue(args: argparse.Namespace) -> int:
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
                print(render_unlocated(entry, _profile_for(args, entry["template"])))
                return 0
            print(f"\n  prompt (normalized), around {where_found}:")
            print(render_context(entry["prompt_normalized"], start, end))
            return 0
        filters = {"reason": args.reason, "surface": args.surface, "status": args.status}
        rel = query(con, "review/queue_groups", filters)
        groups = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
        rel = query(con, "review/queue_entries", {**filters, "limit": max(args.limit, 0)})
        entries = [dict(zip(rel.columns, r)) for r in rel.fetchall()]
    print(render_groups(groups, entries))
    return 0


def cmd_review(args: argparse.Namespace) -> int:
    from citegate_assets.lib.reviews import append_review, make_review
    from citegate_assets.lib.warehouse import connect, query

    fields = dict(
        citation_id=args.citation_id, outcome=args.outcome, cause=args.cause, note=args.note, reviewer=args.reviewer
    )
    make_review(**fields, queue_reason="-", claim="-", passage=None)  # refuse a bad outcome or cause before anything
    settings = _settings(args)
    _load_config(settings)
    with connect(_readable(args), read_only=True) as con:
        rows = query(con, "report/review_lookup", {"citation_id": args.citation_id}).fetchall()
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
    cause = f" ({safe(review.cause)})" if review.cause else ""
    print(
        f"recorded {safe(review.outcome)}{cause} on {ident(review.citation_id)} by {ident(review.reviewer)} in "
        f"{safe(path)}\nits status ({safe(status)} now) follows on the next run: citegate run, or the nightly schedule"
    )
    return 0


LABEL_KEYS = {"y": "yes", "p": "partial", "n": "no", "s": "skip"}


def cmd_label(args: argparse.Namespace) -> int:
    """The labelling mode at a terminal (the review page's Label tab is its twin): the sample drawn from the published
    copy (lib/own_labels.py), one pair at a time, blind, each key press appended to the labels folder's
    own-labels.jsonl (lib/label_log.py)."""
    from citegate_assets.lib.label_log import LOG_NAME, LabelError, append_label, make_line, read_label_log, replay
    from citegate_assets.lib.own_labels import checked_size, draw_sample, line_for, next_pair, progress, undo_line
    from citegate_assets.lib.reviews import default_reviewer
    from citegate_assets.lib.warehouse import connect

    settings = _settings(args)
    _load_config(settings)
    seed, size = checked_size(args.sample_seed, args.sample_size)
    labeller = (args.labeller if args.labeller is not None else default_reviewer()).strip()
    if not labeller:
        raise ValueError("--labeller: give your name (it is recorded with every label)")
    folder = settings.labels
    if folder.exists() and not folder.is_dir():
        raise ValueError(
            f"{folder}: a file ({settings.sources['labels'][1]}); own labels are appended to {LOG_NAME} in a labels "
            "folder: name a folder with --labels"
        )
    with connect(_readable(args), read_only=True) as con:
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


def _did_you_mean(con: duckdb.DuckDBPyConnection, typed: str) -> str:
    """A hint, never a substitute: the queue's ids that differ from the typed one only by blanks at either end
    (ids are used exactly as stored; request ids may hold spaces, so " r1#2" and "r1#2" are two citations)."""
    from citegate_assets.lib.warehouse import query

    core = typed.strip()
    if not core:
        return ""
    candidates = query(con, "report/near_citation_ids", {"core": core}).fetchall()
    near = [cid for (cid,) in candidates if cid != typed and cid.strip() == core][:5]
    if not near:
        return ""
    return (
        "; did you mean "
        + " or ".join(quote(cid) for cid in near)
        + "? (ids are used exactly as typed, blanks included)"
    )


def _profile_for(args: argparse.Namespace, template: str | None) -> Profile | None:
    """The profile named `template`: built in, or from the config file in force (None when neither has it)."""
    from citegate_assets.lib.profiles import BUILTIN_PROFILES

    if template is None:  # no template logged: no profile read the prompt
        return None
    if template in BUILTIN_PROFILES:
        return BUILTIN_PROFILES[template]
    try:
        return _load_config(_settings(args)).profile(template)
    except (ValueError, OSError):  # a bad or missing config file: the prompt is still worth showing
        return None


if __name__ == "__main__":
    sys.exit(main())
