"""The tools around the pipeline: doctor and import (read logs, no warehouse), estimate (before a backfill) and serve
(the review web page)."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import click

from citegate_assets.cli.options import (
    DAY,
    READER_PATHS,
    describe,
    example,
    load_config,
    readable,
    settings_from,
    shared,
)
from citegate_assets.lib.core.terminal import ident, safe


@click.command(epilog=example("citegate doctor --logs data/landing --limit 200"))
@shared("landing", "config")
@click.option(
    "--limit", type=int, default=1000, metavar="N", help="records examined per surface (default 1000; 0: all)"
)
def doctor(**params: Any) -> int:
    """Does each surface's template fit its prompts? Reads the logs only, no warehouse.

    Lists the first lines that would be rejected (file:line  reason  detail) and exits 1 when there are any."""
    from citegate_assets.lib.ingest.doctor import doctor as examine
    from citegate_assets.lib.ingest.doctor import render

    settings = settings_from(params)
    cfg = load_config(settings)
    if not settings.landing.is_dir():
        raise FileNotFoundError(f"{settings.landing}: landing folder not found ({settings.sources['landing'][1]})")
    limit = params["limit"] if params["limit"] and params["limit"] > 0 else None
    report = examine(settings.landing, cfg, limit=limit)
    print(render(report, settings.landing, str(cfg.path or "built-in defaults"), limit))  # render escapes logged values
    return 0 if report.ok and not report.reading.reject_rows else 1  # lines that would be rejected: 1


@click.command("import", epilog=example("citegate import --from otlp traces/spans.jsonl --out imported/"))
@click.argument("file", type=click.Path(path_type=Path), metavar="FILE")
@shared("trace_format", "out", "config")
def import_trace(**params: Any) -> int:
    """Convert one trace file (OpenTelemetry, OpenInference, Langfuse, Anthropic) to citegate-log/1 lines, to look
    at before it lands.

    FILE: the trace file (.json, .jsonl, or either gzipped). Writes DIR/<name>.jsonl, never overwriting, and prints
    every reject with its source line; exit 1 when something was rejected, 2 when the file is not of FORMAT."""
    from citegate_assets.lib.core.timestamps import utc_now
    from citegate_assets.lib.ingest.adapters import Call, convert_file, record_line
    from citegate_assets.lib.ingest.records import Reject, parse_line

    cfg = load_config(settings_from(params))
    source: Path = params["file"]
    out: Path = params["out"]
    if not source.is_file():
        raise FileNotFoundError(f"{source}: no such file")
    stem = source.name.removesuffix(".gz")
    stem = stem.removesuffix(".jsonl").removesuffix(".json")
    target = out / f"{stem}.jsonl"
    if target.exists():
        raise FileExistsError(f"{target} exists; nothing was written (remove it, or choose another --out)")
    conv = convert_file(
        source,
        cfg.adapters.settings(),
        format=params["trace_format"],
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
    out.mkdir(parents=True, exist_ok=True)
    with open(target, "xb") as fh:
        fh.writelines(line + b"\n" for line in written)
    print(safe(conv.describe()))
    print(safe(f"wrote {target}: {len(written)} calls written, {rejected} rejected"), flush=True)
    return 1 if rejected else 0


@click.command(epilog=example("citegate estimate --start 2026-11-02 --end 2026-11-15"))
@click.option(
    "--start", type=DAY, default=None, metavar="DATE", help="first day, YYYY-MM-DD (default: first day in the copy)"
)
@shared("end", *READER_PATHS, "config")
def estimate(**params: Any) -> int:
    """Before a backfill: the citations the judge would see, those already cached, and the tokens and cost per judge
    model and mode (calls nothing; reads the published copy).

    With [judge] mode = "cascade" it runs the screen on the pairs (in process) and counts for the LLM models only the
    pairs the screen leaves undecided."""
    from citegate_assets.lib.estimate import default_range, render
    from citegate_assets.lib.estimate import estimate as judge_estimate
    from citegate_assets.lib.storage.warehouse import connect
    from citegate_assets.lib.support.judge.factory import effective_judge_config, make_secondary_judge, make_tiers

    settings = settings_from(params)
    cfg = load_config(settings)
    judge_cfg = effective_judge_config(cfg.judge)
    tiers = make_tiers(judge_cfg)  # builds the clients only: no call
    configured = (tiers.llm or tiers.screen).model  # type: ignore[union-attr]
    models = {configured: not judge_cfg.base_url, **{m: False for m in cfg.judge.prices if m != configured}}
    second = cfg.judge.secondary
    candidate = make_secondary_judge(cfg.judge, primary_base_url=judge_cfg.base_url)  # no call either
    secondary = (
        None if second is None or candidate is None else (candidate.model, not (second.base_url or second.model))
    )
    first, last = params["start"], params["end"]
    if first and last and last < first:
        raise ValueError(f"--end {last} is before --start {first}")
    with connect(readable(settings), read_only=True) as con:
        found = default_range(con)
        if found is None and (first is None or last is None):
            raise ValueError("the published copy holds no citations: give --start and --end, or run first")
        start = first or (found[0] if found else first)
        end = last + timedelta(days=1) if last else (found[1] if found else start)
        screen = tiers.screen if tiers.tier == "cascade" else None  # the LLM counts only what it leaves
        result = judge_estimate(con, cfg, start, end, models, configured, secondary, screen=screen)
    print(render(result, start, end, configured, judge_cfg.mode))
    return 0


# The paths the review page uses: the published copy it reads, the logs its decisions and labels go to.
SERVE_PATHS = (*READER_PATHS, "config", "reviews", "labels")


@click.command(
    epilog=example("citegate serve", "citegate serve --host 0.0.0.0 --auth proxy --auth-header X-Forwarded-User")
)
@shared(*SERVE_PATHS, "host", "port", "auth", "auth_header", "tokens")
def serve(**params: Any) -> int:
    """The review web page: the queue, each entry, decisions (to the reviews log), the weekly metrics and the Label
    tab; reads the published copy (docs/review-web.md).

    With --auth local it prints the URL with its access token, for you alone."""
    import uvicorn

    from citegate_assets.review_web.app import ServeOptions, create_app
    from citegate_assets.review_web.auth import check_access_token, new_access_token
    from citegate_assets.review_web.server import ServerLimits, server_config

    host, port, auth = params["host"], params["port"], params["auth"]
    settings = settings_from(params)
    page = load_config(settings).review_page
    given = os.environ.get("CITEGATE_REVIEW_TOKEN")
    access_token = None
    if auth == "local":
        access_token = check_access_token(given, "CITEGATE_REVIEW_TOKEN") if given else new_access_token()
    limits = ServerLimits(
        max_connections=page.max_connections,
        head_timeout_s=page.head_timeout_s,
        keep_alive_s=page.keep_alive_s,
        body_timeout_s=page.body_timeout_s,
    )
    options = ServeOptions(
        auth=auth,
        auth_header=params["auth_header"],
        tokens=params["tokens"],
        host=host,
        access_token=access_token,
        session_idle_s=page.session_idle_minutes * 60,
        session_max_s=page.session_max_hours * 3600,
        limits=limits,
    )
    app = create_app(settings, options)
    config = server_config(app, host, port, limits)
    print(describe(settings, *SERVE_PATHS))  # only what the page uses: no landing folder, lake or Dagster home
    if host not in ("127.0.0.1", "localhost", "::1") and auth == "local":
        print(
            f"warning: listening on {safe(host)} with --auth local: whoever has the URL below can review under "
            "any name, and it crosses the network in clear; use --auth proxy or --auth tokens for a team",
            file=sys.stderr,
        )
    url = f"http://{safe(host)}:{port}/"
    if auth != "local":
        print(f"review page: {url}  (auth: {auth}; Ctrl-C stops it)", flush=True)
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


COMMANDS = (doctor, import_trace, estimate, serve)
