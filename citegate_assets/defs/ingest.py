"""Ingest stage: the prompt log (landing folder) into the warehouse's append-only tables."""

import dagster as dg
import polars as pl

from citegate_assets.lib.ingest import ingest_landing
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.terminal import safe
from citegate_assets.lib.warehouse import query

from .partitions import daily_partitions, partition_days, row_count_metadata
from .resources import DUCKDB_POOL, WarehouseResource

prompt_log = dg.AssetSpec(
    "prompt_log",
    description="Logged model calls (citegate-log/1 JSONL, optionally gzipped) in the landing folder; written by the RAG product.",
    group_name="ingest",
    kinds={"json"},
)

INGEST_TABLES = {
    "prompts": "Every logged prompt as sent (raw), its sha256, its normalized text and the context block offsets.",
    "prompt_sections": "Each chunk section of each prompt's context block, resolved to the retrieved chunk it carries.",
    "retrievals": "What retrieval returned for each call, before prompt assembly, and whether it reached the prompt.",
    "citations": "Each structured citation (chunk id, verbatim span, claim); citation_id = request_id#position.",
    "ingest_rejects": "Lines or files that could not be ingested, with file, line, raw text and a reason code.",
    "answer_rejects": "Answers whose citations field does not parse (their prompt is still stored), with a reason code.",
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
            description="For every landing file: lines read = records ingested + records rejected.",
        )
    ],
    partitions_def=daily_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    pool=DUCKDB_POOL,
)
def ingest_prompt_log(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Ingest new landing files: validate, normalize each prompt once, append; bad lines become reject rows."""
    start, end = partition_days(context)
    config = warehouse.config()
    landing = warehouse.landing_path()
    context.log.info(f"ingesting {landing} into {warehouse.database_path()}")

    def progress(file_name: str, lines: int, nbytes: int) -> None:
        context.log.info(
            f"{safe(file_name)}: {lines:,} lines read ({nbytes / 1e6:,.1f} MB this run)"
        )  # names come from the landing folder

    with warehouse.connect() as con:
        summary = ingest_landing(con, landing, config, progress=progress, final=warehouse.final_read)
        counts = dict(query(con, "ingest/partition_counts", {"start": start, "end": end}).fetchall())
        reject_reasons = query(con, "ingest/reject_reasons", {"start": start, "end": end}).pl()
        unbalanced = con.sql(
            "select file_name, lines_read, records_ingested, records_rejected from ingested_files "
            "where lines_read <> records_ingested + records_rejected"
        ).pl()
        preview = query(con, "ingest/prompts_preview", {"start": start, "end": end}).pl()
    outside = sorted(d.isoformat() for d in summary.days if not start <= d < end)
    run_facts = {
        "files_read_this_run": summary.files_read,
        "lines_read_this_run": summary.lines_read,
        "records_ingested_this_run": summary.records_ingested,
        "records_rejected_this_run": summary.records_rejected,
        "answers_rejected_this_run": summary.answers_rejected,
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
    pool=DUCKDB_POOL,
    description="Every stored prompt still hashes to the sha256 recorded when it was ingested, and the number of "
    "stored prompts never goes down (the prompt log is immutable).",
)
def prompts_match_their_sha256(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    with warehouse.connect() as con:
        tampered = query(con, "metric_tables/check_prompt_hashes").pl()
        [(stored,)] = con.sql("select count(*) from prompts").fetchall()
        [(most,)] = con.sql("select coalesce(max(prompts), 0) from prompt_count_history").fetchall()
        con.execute("insert into prompt_count_history values (now(), $n)", {"n": stored})
    ids = tampered["request_id"].to_list()
    problems = []
    if ids:
        problems.append(f"{len(ids)} stored prompts no longer match their sha256: {', '.join(ids[:20])}")
    if stored < most:
        problems.append(f"stored prompts went down from {most} to {stored}: rows were deleted from the prompt log")
    return dg.AssetCheckResult(
        passed=not problems,
        description="; ".join(problems) if problems else f"{stored} prompts verified",
        metadata={
            "prompts_checked": stored,
            "most_ever_stored": most,
            "mismatched": len(ids),
            "request_ids": dg.MetadataValue.md(markdown_table(tampered)),
        },
    )
