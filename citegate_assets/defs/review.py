"""Review stage: best available evidence, the reason-grouped queue, and reviewers' outcomes (docs/review.md;
SPEC sections 6-7)."""

from datetime import datetime

import dagster as dg
import polars as pl

from citegate_assets.defs.asset_defaults import DAILY, DUCKDB_POOL, JUDGE_POOL, judge_order, judge_slots
from citegate_assets.defs.partitions import partition_days, row_count_metadata
from citegate_assets.defs.resources import CitegateConfigResource, JudgeResource, ReviewFilesResource, WarehouseResource
from citegate_assets.lib.core.processes import map_rows
from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP, utc_now
from citegate_assets.lib.provenance.passages import other_passages
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.review.best_evidence import decide_cause, top_candidates
from citegate_assets.lib.review.reviews import latest_by_citation, read_reviews
from citegate_assets.lib.storage.text_store import streamed_text
from citegate_assets.lib.storage.warehouse import append_frame, query, run_script, transaction
from citegate_assets.lib.support.cascade import judge_tiered
from citegate_assets.lib.support.numbers import numeric_piece
from citegate_assets.lib.support.policies import registered_policies


@dg.asset(
    group_name="review",
    kinds={"duckdb", "openai"},
    deps=["support_verdicts", "numeric_checks"],
    pool=JUDGE_POOL,
    **DAILY,
)
def best_evidence(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    judge: JudgeResource,
) -> dg.MaterializeResult:
    """For each support failure: did another passage in the prompt support the claim? generation,
    ranking_or_chunking or no_evidence; unknown when a passage no judge could decide leaves it open. The other
    passages go through the support gate's tiers (the screen first in a cascade, online)."""
    start, end = partition_days(context)
    config = citegate_config.config()
    tiers = judge.tiers(config, slots=judge_slots(context))
    params = {"start": start, "end": end}
    with warehouse.connect() as con:
        failures = query(con, "review/support_failures", params).pl()
        others = other_passages(con, failures, start, end)
    assessed = failures.select(
        "citation_id",
        assessed=pl.col("surface").is_in(
            [s for s in failures["surface"].unique() if config.surface(s).stakes != "off"]
        ),
    )
    best = top_candidates(
        others.join(assessed.filter("assessed").select("citation_id"), on="citation_id"),
        int(config.queue.best_evidence_k),
    )
    verdicts, facts = judge_tiered(
        warehouse.connect,
        best.select(item_id=pl.col("citation_id") + "|" + pl.col("chunk_id"), passage="passage", claim="claim"),
        tiers,
        config.judge.prices,
        side_by_side=judge_order(context),
    )
    judged = (
        best.with_columns(item_id=pl.col("citation_id") + "|" + pl.col("chunk_id"))
        .join(verdicts.select("item_id", "verdict"), on="item_id", how="left")
        .with_columns(
            # numeric_piece reads each passage once per process (a chunk is a candidate for many claims)
            numeric_ok=pl.Series(
                [not missing for _, missing in map_rows(numeric_piece, [best["claim"], best["passage"]], 1)],
                dtype=pl.Boolean,
            )
        )
    )
    by_citation: dict[str, list[dict]] = {}
    for row in judged.select("citation_id", "chunk_id", "coverage", "verdict", "numeric_ok").iter_rows(named=True):
        by_citation.setdefault(row.pop("citation_id"), []).append(row)
    rows = []
    for f, a in zip(failures.iter_rows(named=True), assessed["assessed"].to_list()):
        cands = by_citation.get(f["citation_id"], [])
        cause, better, better_verdict = decide_cause(f["cited_verdict"], f["cited_numeric_ok"], cands, a)
        rows.append(
            {
                "citation_id": f["citation_id"],
                "request_id": f["request_id"],
                "day": f["day"],
                "surface": f["surface"],
                "cited_verdict": f["cited_verdict"],
                "cited_numeric_ok": f["cited_numeric_ok"],
                "assessed": a,
                "cause": cause,
                "better_chunk_id": better,
                "better_verdict": better_verdict,
                "candidates": cands,
            }
        )
    schema: dict[str, pl.DataType] = {
        "citation_id": pl.String(),
        "request_id": pl.String(),
        "day": pl.Date(),
        "surface": pl.String(),
        "cited_verdict": pl.String(),
        "cited_numeric_ok": pl.Boolean(),
        "assessed": pl.Boolean(),
        "cause": pl.String(),
        "better_chunk_id": pl.String(),
        "better_verdict": pl.String(),
        "candidates": pl.List(
            pl.Struct({"chunk_id": pl.String, "coverage": pl.Float64, "verdict": pl.String, "numeric_ok": pl.Boolean})
        ),
    }
    frame = pl.DataFrame(rows, schema=schema).with_columns(computed_at=pl.lit(utc_now(), dtype=UTC_TIMESTAMP))
    with warehouse.connect() as con, transaction(con):
        run_script(con, "review/delete_best_evidence", params)
        append_frame(con, "best_evidence", frame)
    causes = frame.group_by("surface", "cause").len().sort("surface", "cause")
    return dg.MaterializeResult(
        metadata={
            **row_count_metadata(start, end, frame.height),
            "extra_judge_calls": facts["judge_calls"],
            "extra_llm_calls": facts["llm_calls"],
            "candidates_unjudged": facts["unjudged"],
            "cache_hits": facts["cache_hits"],
            "causes": dg.MetadataValue.md(markdown_table(causes, 40)),
        }
    )


@dg.asset(group_name="review", kinds={"duckdb"}, pool=DUCKDB_POOL)
def review_outcomes(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    review_files: ReviewFilesResource,
) -> dg.MaterializeResult:
    """Reviewers' decisions from the append-only reviews log; a later decision on an entry supersedes, both are kept."""
    folder = review_files.reviews_path(warehouse, citegate_config)
    lines = read_reviews(folder)
    latest = {r.review_id for r in latest_by_citation(lines).values()}
    good = [(ln, ln.review) for ln in lines if ln.review is not None]
    outcomes = pl.DataFrame(
        [
            {
                **{
                    k: getattr(review, k)
                    for k in (
                        "review_id",
                        "citation_id",
                        "outcome",
                        "cause",
                        "note",
                        "reviewer",
                        "queue_reason",
                        "claim",
                        "passage",
                    )
                },
                "reviewed_at": datetime.fromisoformat(review.reviewed_at),
                "source_file": ln.file,
                "source_line": ln.line_no,
                "is_latest": review.review_id in latest,
            }
            for ln, review in good
        ],
        schema={
            "review_id": pl.String,
            "citation_id": pl.String,
            "outcome": pl.String,
            "cause": pl.String,
            "note": pl.String,
            "reviewer": pl.String,
            "queue_reason": pl.String,
            "claim": pl.String,
            "passage": pl.String,
            "reviewed_at": UTC_TIMESTAMP,
            "source_file": pl.String,
            "source_line": pl.Int64,
            "is_latest": pl.Boolean,
        },
    ).unique("review_id", keep="first", maintain_order=True)
    now = utc_now()
    rejects = pl.DataFrame(
        [
            {"source_file": ln.file, "line_no": ln.line_no, "error": ln.error, "raw_line": ln.raw, "recorded_at": now}
            for ln in lines
            if ln.review is None
        ],
        schema={
            "source_file": pl.String,
            "line_no": pl.Int64,
            "error": pl.String,
            "raw_line": pl.String,
            "recorded_at": UTC_TIMESTAMP,
        },
    )
    with warehouse.connect() as con, transaction(con):
        run_script(con, "review/delete_outcomes")  # rebuilt from the append-only log: idempotent
        append_frame(con, "review_outcomes", outcomes)
        append_frame(con, "review_rejects", rejects)
        run_script(con, "review/refresh_status")
        escalations = query(con, "review/escalations").pl()
    in_force = outcomes.filter("is_latest").group_by("outcome").len().sort("outcome")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": outcomes.height,
            "reviews_log": str(folder),
            "unreadable_lines": rejects.height,
            "decisions_in_force": dg.MetadataValue.md(markdown_table(in_force)),
            "escalations_by_cause": dg.MetadataValue.md(markdown_table(escalations)),
        }
    )


@dg.asset(
    group_name="review",
    kinds={"duckdb"},
    deps=["provenance_results", "support_verdicts", "numeric_checks", best_evidence, review_outcomes],
    **DAILY,
)
def citation_queue(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, citegate_config: CitegateConfigResource
) -> dg.MaterializeResult:
    """One entry per citation failing either gate, grouped by reason, with the evidence a reviewer needs
    and its status."""
    start, end = partition_days(context)
    config = citegate_config.config()
    queue_owners = pl.DataFrame(
        {"reason": list(config.queue.owners), "owner": list(config.queue.owners.values())},
        schema={"reason": pl.String, "owner": pl.String},
    )
    params = {"start": start, "end": end, "now": utc_now()}
    with warehouse.connect() as con:
        with transaction(con), registered_policies(con, config, start, end):
            con.register("queue_owners", queue_owners.to_arrow())
            run_script(con, "review/delete_queue", params)
            with streamed_text(con):
                run_script(con, "review/citation_queue", params)
            con.unregister("queue_owners")
        volume = query(con, "review/queue_volume", params).pl()
        [(n,)] = query(con, "review/queue_count", params).fetchall()
    by_reason = (
        volume.group_by("reason").agg(pl.col("entries").sum(), pl.col("open").sum()).sort("entries", descending=True)
    )
    return dg.MaterializeResult(
        metadata={
            **row_count_metadata(start, end, n),
            "volume_by_reason": dg.MetadataValue.md(markdown_table(by_reason, 20)),
            "volume_by_reason_and_surface": dg.MetadataValue.table(
                records=[dg.TableRecord({k: v for k, v in r.items()}) for r in volume.iter_rows(named=True)],
                schema=dg.TableSchema(
                    columns=[
                        dg.TableColumn("reason", "string"),
                        dg.TableColumn("surface", "string"),
                        dg.TableColumn("owner", "string"),
                        dg.TableColumn("entries", "int"),
                        dg.TableColumn("open", "int"),
                    ]
                ),
            ),
        }
    )
