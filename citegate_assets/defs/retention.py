"""Retention stage: drop old prompt and chunk text ([retention] text_days), and refuse to re-gate days whose text is
gone (docs/retention.md)."""

import dagster as dg
import polars as pl

from citegate_assets.defs.asset_defaults import DUCKDB_POOL
from citegate_assets.defs.partitions import run_days
from citegate_assets.defs.resources import CitegateConfigResource, WarehouseResource
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.retention.drop_text import (
    TEXT_TABLES,
    apply_retention,
    cutoff_day,
    refusal,
    run_days_without_text,
    scrub_forgotten,
)
from citegate_assets.lib.storage.file_rewrite import rewrite_if_text_removed

TEXT_CHECK = "run_days_hold_their_text"


@dg.asset_check(
    asset="prompts",
    blocking=True,
    description="The run's days still hold their prompt text: a day whose text was dropped ([retention] text_days) "
    "or that holds a forgotten request is never re-gated into different verdicts; its stored verdicts stand.",
)
def run_days_hold_their_text(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
) -> dg.AssetCheckResult:
    days = run_days(context)
    with warehouse.connect() as con:
        rows = run_days_without_text(con, days) if days else []
    table = [{"day": str(d), "prompts_without_text": n, "prompts": total, "retained": r} for d, n, total, r in rows]
    return dg.AssetCheckResult(
        passed=not rows,
        description=refusal(rows) if rows else f"all {len(days)} days of the run hold their prompt text",
        metadata={"days_without_text": len(rows), "days": dg.MetadataValue.json(table)},
    )


@dg.asset(
    group_name="retention",
    kinds={"duckdb"},
    # the run's own days are never touched (keep_days), so it needs only what it drops text from to be written:
    # the ingest tables, and the tables the reviews log refills each night (scrub_forgotten); the priority runs
    # it as soon as they are, long before published_warehouse, which then publishes the text's absence
    deps=["prompts", "retrievals", "citations", "answer_rejects", "ingest_rejects", "review_outcomes", "hand_labels"],
    op_tags={"dagster/priority": "1"},
    pool=DUCKDB_POOL,
    description="Days older than [retention] text_days before today (UTC) without their prompt, chunk, citation "
    "and answer text: hashes, offsets, reasons, verdicts and metrics stay (docs/retention.md).",
)
def text_retention(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, citegate_config: CitegateConfigResource
) -> dg.MaterializeResult:
    text_days = citegate_config.config().retention.text_days
    now = utc_now()
    with warehouse.connect() as con:
        rescrubbed = sum(scrub_forgotten(con).values())
        dropped = apply_retention(con, text_days, now, keep_days=run_days(context))
    # the freed blocks of the file still hold what was dropped: rewritten now, before the publish
    rewrite = rewrite_if_text_removed(warehouse.database_path())
    if rewrite is not None:
        context.log.info(
            f"retention: working file rewritten without its freed blocks in {rewrite.seconds:.1f} s "
            f"({rewrite.bytes_before / 1e6:,.1f} -> {rewrite.bytes_after / 1e6:,.1f} MB)"
        )
    rewritten = {"file_rewritten_s": round(rewrite.seconds, 3) if rewrite is not None else 0.0}
    if text_days <= 0:
        return dg.MaterializeResult(
            metadata={
                "text_days": 0,
                "note": "text is kept forever",
                "forgotten_text_dropped_again": rescrubbed,
                **rewritten,
            }
        )
    rows = [{"day": str(day), **counts} for day, counts in sorted(dropped.items())]
    context.log.info(f"retention: text dropped from {len(dropped)} days before {cutoff_day(text_days, now.date())}")
    return dg.MaterializeResult(
        metadata={
            "text_days": text_days,
            "cutoff": str(cutoff_day(text_days, now.date())),
            "days_dropped": len(dropped),
            "rows_dropped": sum(sum(c.values()) for c in dropped.values()),
            "forgotten_text_dropped_again": rescrubbed,
            **rewritten,
            "by_day": dg.MetadataValue.md(markdown_table(pl.DataFrame(rows, schema=["day", *TEXT_TABLES]))),
        }
    )
