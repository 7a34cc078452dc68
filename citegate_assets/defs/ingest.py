"""Ingest stage: the prompt log (landing folder) into the warehouse's append-only tables."""

from collections.abc import Iterator

import dagster as dg
import polars as pl

from citegate_assets.defs.asset_defaults import DAILY
from citegate_assets.defs.partitions import partition_days, row_count_metadata, run_days
from citegate_assets.defs.resources import CitegateConfigResource, LakeResource, LandingResource, WarehouseResource
from citegate_assets.lib.core.terminal import safe
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.ingest.shard_staging import staging_root
from citegate_assets.lib.ingest.shards import ingest_sharded
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.prompt_integrity import ROTATION_DAYS, days_to_verify
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.storage.text_store import streamed_text
from citegate_assets.lib.storage.warehouse import query, run_script

prompt_log = dg.AssetSpec(
    "prompt_log",
    description="Logged model calls in the landing folder (citegate-log/1 JSONL, or a trace export: OpenTelemetry, "
    "OpenInference, Langfuse, Anthropic; optionally gzipped); written by the RAG product or its tracer.",
    group_name="ingest",
    kinds={"json"},
)

INGEST_TABLES = {
    "prompts": "Every logged prompt as sent (raw), its sha256, its normalized text and the context block offsets.",
    "prompt_sections": "Each chunk section of each prompt's context block, resolved to the retrieved chunk it carries.",
    "retrievals": "What retrieval returned for each call, before prompt assembly, and whether it reached the prompt.",
    "citations": "Each structured citation (chunk id, verbatim span, claim); citation_id = request_id#position.",
    "ingest_rejects": "Lines or files that could not be ingested, with file, line, raw text and a reason code.",
    "answer_rejects": "Answers whose citations field does not parse (their prompt is still stored), "
    "with a reason code.",
    "prompt_conflicts": "Second records under a known request_id with a different prompt; the first is kept.",
    "ingested_files": "Ledger of landing files: lines read, records ingested and rejected, status.",
}
INGEST_CHECK = "every_line_accounted_for"


@dg.multi_asset(
    specs=[
        dg.AssetSpec(name, description=text, group_name="ingest", kinds={"duckdb"}, deps=[prompt_log])
        for name, text in INGEST_TABLES.items()
    ],
    check_specs=[
        dg.AssetCheckSpec(
            INGEST_CHECK,
            asset="ingested_files",
            blocking=True,
            description="For every landing file: lines read = records ingested + records rejected (for a trace "
            "file, its items: calls and line rejects).",
        )
    ],
    **DAILY,
)
def ingest_prompt_log(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    landing: LandingResource,
    citegate_config: CitegateConfigResource,
    lake: LakeResource,
) -> Iterator[dg.MaterializeResult]:
    """Ingest new landing files: validate, normalize each prompt once, append; bad lines become reject rows."""
    start, end = partition_days(context)
    config = citegate_config.config()
    folder = landing.path()
    context.log.info(f"ingesting {folder} into {warehouse.database_path()}")

    def progress(file_name: str, lines: int, nbytes: int) -> None:
        context.log.info(
            f"{safe(file_name)}: {lines:,} lines read ({nbytes / 1e6:,.1f} MB this run)"
        )  # names come from the landing folder

    with warehouse.connect() as con:
        # the files split across shard processes, staged in the lake (lib/ingest/shards.py)
        if config.ingest.shards > 1:
            staging = staging_root(lake.root(warehouse, citegate_config))
            context.log.info(f"ingest split across {config.ingest.shards} shards, staged in {staging}")
            summary = ingest_sharded(
                con, folder, config, shards=config.ingest.shards, staging=staging, final=landing.final_read
            )
        else:
            summary = ingest_landing(con, folder, config, progress=progress, final=landing.final_read)
        # the prompt log never shrinks: prompts_match_their_sha256 compares later counts with these
        run_script(con, "ingest/record_prompt_count", {"recorded_at": utc_now()})
        counts = dict(query(con, "ingest/partition_counts", {"start": start, "end": end}).fetchall())
        reject_reasons = query(con, "ingest/reject_reasons", {"start": start, "end": end}).pl()
        unbalanced = query(con, "ingest/unbalanced_files").pl()
        with streamed_text(con):
            preview = query(con, "ingest/prompts_preview", {"start": start, "end": end}).pl()
    outside = sorted(d.isoformat() for d in summary.days if not start <= d < end)
    run_facts = {
        "files_read_this_run": summary.files_read,
        "lines_read_this_run": summary.lines_read,
        "records_ingested_this_run": summary.records_ingested,
        "records_rejected_this_run": summary.records_rejected,
        "answers_rejected_this_run": summary.answers_rejected,
        # trace-format files converted, and their new items (calls, ingested or rejected, and line rejects)
        "trace_files_converted_this_run": summary.trace_files,
        "trace_items_this_run": summary.calls_converted,
        # [ingest] workers: processes that parsed batches (0 = none: a small run parses in the ingest process)
        "parse_workers_this_run": summary.parse_workers,
        # [ingest] shards: processes the landing files were split across (1: one ingest, no staging)
        "ingest_shards_this_run": config.ingest.shards,
        # held back, not lost: an unterminated last line or an unfinished .gz, read once complete
        "files_waiting": summary.files_waiting,
        "bytes_held_back": summary.bytes_held,
        "days_ingested_outside_this_partition": ", ".join(outside[:31]) + (" …" if len(outside) > 31 else ""),
    }
    for name in INGEST_TABLES:
        metadata = row_count_metadata(start, end, counts.get(name, 0))
        if name == "prompts":
            metadata |= run_facts | {"preview": dg.MetadataValue.md(markdown_table(preview))}
        if name in ("ingest_rejects", "answer_rejects"):
            metadata["reasons"] = dg.MetadataValue.md(
                markdown_table(reject_reasons.filter(pl.col("table_name") == name))
            )
        if name == "ingested_files":
            yield dg.MaterializeResult(
                asset_key=name,
                metadata=metadata,
                check_results=[
                    dg.AssetCheckResult(
                        check_name=INGEST_CHECK,
                        passed=unbalanced.is_empty(),
                        metadata={"files_out_of_balance": dg.MetadataValue.md(markdown_table(unbalanced))},
                    )
                ],
            )
        else:
            yield dg.MaterializeResult(asset_key=name, metadata=metadata)


@dg.asset_check(
    asset="prompts",
    blocking=True,
    description="Every stored prompt still hashes to the sha256 recorded when it was ingested (the run's days every "
    "night, older days in a weekly rotation), and the number of stored prompts never goes down (the prompt log is "
    "immutable).",
)
def prompts_match_their_sha256(
    context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
) -> dg.AssetCheckResult:
    # read-only, like every check: ingest_prompt_log records the count after each ingest
    with warehouse.connect() as con:
        stored_days = dict(query(con, "ingest/prompt_days").fetchall())
        days = days_to_verify(stored_days, run_days(context), utc_now().date())
        # a day at a time: each query opens only its day's text files, and streams them
        with streamed_text(con):
            found = [query(con, "ingest/check_prompt_hashes", {"day": d}).pl() for d in days]
        tampered = pl.concat(found).sort("request_id") if found else pl.DataFrame(schema={"request_id": pl.String})
        [(stored, most)] = query(con, "ingest/prompt_count").fetchall()
    ids = tampered["request_id"].to_list()
    hashed = sum(stored_days[d] for d in days)
    problems = []
    if ids:
        problems.append(f"{len(ids)} stored prompts no longer match their sha256: {', '.join(ids[:20])}")
    if stored < most:
        problems.append(f"stored prompts went down from {most} to {stored}: rows were deleted from the prompt log")
    verified = f"{hashed} prompts of {len(days)} days re-hashed ({stored} stored; all within {ROTATION_DAYS} nights)"
    return dg.AssetCheckResult(
        passed=not problems,
        description="; ".join(problems) if problems else verified,
        metadata={
            "prompts_checked": hashed,
            "days_checked": len(days),
            "prompts_stored": stored,
            "most_ever_stored": most,
            "mismatched": len(ids),
            "request_ids": dg.MetadataValue.md(markdown_table(tampered)),
        },
    )
