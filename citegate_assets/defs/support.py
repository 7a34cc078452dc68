"""Support stage: which citations are judged, the numeric check, and the judge's verdicts (docs/support-gate.md;
SPEC section 5)."""

from typing import TYPE_CHECKING

import dagster as dg
import polars as pl

from citegate_assets.defs.asset_defaults import DAILY, JUDGE_POOL, judge_order, judge_slots
from citegate_assets.defs.partitions import partition_days, row_count_metadata
from citegate_assets.defs.resources import CitegateConfigResource, JudgeResource, WarehouseResource, judge_share
from citegate_assets.lib.config import JudgeConfig
from citegate_assets.lib.core.processes import map_rows, worker_count
from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP, utc_now
from citegate_assets.lib.provenance.passages import cited_passages
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.storage.warehouse import append_frame, query, run_script, transaction
from citegate_assets.lib.support.agreement import SALT as AGREEMENT_SALT
from citegate_assets.lib.support.agreement import agreement, confusion_rows
from citegate_assets.lib.support.cascade import cascade_line, judge_tiered
from citegate_assets.lib.support.judge.base import Judge
from citegate_assets.lib.support.judge.factory import effective_judge_config, make_secondary_judge
from citegate_assets.lib.support.judging import judge_items, judge_items_batch
from citegate_assets.lib.support.numbers import numeric_piece
from citegate_assets.lib.support.sampling import select_sample

if TYPE_CHECKING:  # the client imports openai, which a run without the Batch API never needs
    from citegate_assets.lib.support.judge.batch import BatchClient


@dg.asset(group_name="support", kinds={"duckdb"}, deps=["provenance_results"], **DAILY)
def support_sample(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, citegate_config: CitegateConfigResource
) -> dg.MaterializeResult:
    """Which provenance-passing citations the judge sees, and why:
    high stakes all, low a stable hash sample, off none."""
    start, end = partition_days(context)
    params = {"start": start, "end": end}
    config = citegate_config.config()
    with warehouse.connect() as con:
        with transaction(con):
            select_sample(con, start, end, config)
        why = query(con, "support/sample_summary", params).pl()
    total = int(why["citations"].sum()) if why.height else 0
    return dg.MaterializeResult(
        metadata={**row_count_metadata(start, end, total), "by_surface": dg.MetadataValue.md(markdown_table(why, 40))}
    )


@dg.asset(group_name="support", kinds={"duckdb"}, deps=["provenance_results"], **DAILY)
def numeric_checks(
    context: dg.AssetExecutionContext, warehouse: WarehouseResource, citegate_config: CitegateConfigResource
) -> dg.MaterializeResult:
    """Every number in the claim (%, decimals, separators, currency, ranges) must appear in the cited passage."""
    start, end = partition_days(context)
    params = {"start": start, "end": end}
    with warehouse.connect() as con:
        rows = cited_passages(con, start, end)
    # pure Python per pair: split across the support gate's processes ([judge] workers) when the day is large
    workers = worker_count(citegate_config.config().judge.workers)
    checked = map_rows(numeric_piece, [rows["claim"], rows["passage"]], workers)
    found, missing = [f for f, _ in checked], [m for _, m in checked]
    checks = (
        rows.select("citation_id", "request_id", "day", "surface")
        .with_columns(
            claim_quantities=pl.Series(found, dtype=pl.List(pl.String)),
            missing_quantities=pl.Series(missing, dtype=pl.List(pl.String)),
        )
        .with_columns(
            numeric_ok=pl.col("missing_quantities").list.len() == 0,
            checked_at=pl.lit(utc_now(), dtype=UTC_TIMESTAMP),
        )
    )
    with warehouse.connect() as con, transaction(con):
        run_script(con, "support/delete_numeric", params)
        append_frame(con, "numeric_checks", checks)
    mismatches = checks.filter(~pl.col("numeric_ok"))
    return dg.MaterializeResult(
        metadata={
            **row_count_metadata(start, end, checks.height),
            "numeric_mismatches": mismatches.height,
            "mismatch_preview": dg.MetadataValue.md(
                markdown_table(
                    mismatches.select("citation_id", "surface", pl.col("missing_quantities").list.join(", "))
                )
            ),
        }
    )


@dg.asset(
    group_name="support",
    kinds={"duckdb", "openai"},
    deps=["support_sample", "numeric_checks"],
    pool=JUDGE_POOL,
    **DAILY,
)
def support_verdicts(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    judge: JudgeResource,
) -> dg.MaterializeResult:
    """The judge's verdict per selected citation: the seed's prompt with only the passage and the claim, cached.
    With [judge] mode = "cascade" the screen decides first and the LLM judge gets only what it leaves undecided;
    with no endpoint, what the screen leaves undecided is `unjudged` (never a pass). decided_by names the tier."""
    start, end = partition_days(context)
    config = citegate_config.config()
    tiers = judge.tiers(config, slots=judge_slots(context))
    params = {"start": start, "end": end}
    with warehouse.connect() as con:
        rows = cited_passages(con, start, end, selected_only=True)
        numeric = dict(query(con, "support/numeric_ok", params).fetchall())
    context.log.info(f"judging {rows.height:,} citations with {tiers.describe()}")

    def progress(done: int, total: int) -> None:
        if done == total or done % 500 == 0:
            context.log.info(f"judge: {done:,}/{total:,} calls")

    items = rows.rename({"citation_id": "item_id"})
    client = batch_client(config.judge, tiers.llm, warehouse) if tiers.llm is not None else None
    try:
        if client is not None:
            context.log.info(f"judge mode batch: uncached pairs go to {client.model} through the Batch API")
        elif config.judge.mode == "batch":
            context.log.info(f"judge mode batch needs an endpoint: {tiers.model} runs in process")
        batch = client

        def through_batch(part: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
            assert batch is not None
            return judge_items_batch(
                warehouse.connect, part, batch, config.judge.prices, days=(start, end), log=context.log.info
            )

        results, facts = judge_tiered(
            warehouse.connect,
            items,
            tiers,
            config.judge.prices,
            progress=progress,
            side_by_side=judge_order(context),
            llm_runner=through_batch if client is not None else None,
        )
    finally:
        if client is not None:
            client.close()
    verdicts = (
        rows.select("citation_id", "request_id", "day", "surface", "answer_model")
        .join(results.drop("screen_verdict").rename({"item_id": "citation_id"}), on="citation_id", how="left")
        .with_columns(numeric_ok=pl.col("citation_id").replace_strict(numeric, default=False, return_dtype=pl.Boolean))
        .with_columns(
            support_pass=(pl.col("verdict") == "yes") & pl.col("numeric_ok"),
            judge_is_answer_model=pl.col("judge_model") == pl.col("answer_model"),
        )
    )
    with warehouse.connect() as con, transaction(con):
        run_script(con, "support/delete_verdicts", params)
        append_frame(con, "support_verdicts", verdicts)
        summary = query(con, "support/verdicts_by_surface", params).pl()
    same_model = verdicts.filter(pl.col("judge_is_answer_model")).height
    if same_model:
        context.log.warning(f"{same_model} citations were judged by the model that wrote the answer ({tiers.model})")
    if facts["unjudged"]:
        context.log.warning(
            f"{facts['unjudged']:,} citations are unjudged: the screen left them undecided and no LLM judge is "
            "configured (queued as support_unjudged; never a pass)"
        )
    if tiers.tier == "cascade":
        context.log.info(cascade_line(facts))
    return dg.MaterializeResult(
        metadata={
            **row_count_metadata(start, end, verdicts.height),
            "judge_model": tiers.model,
            "judge_calls": facts["judge_calls"],
            "llm_calls": facts["llm_calls"],
            "cache_hits": facts["cache_hits"],
            "judge_errors": facts["errors"],
            "judge_mode": "batch" if client is not None else tiers.mode,
            "decided_by_screen": facts["screen_decided"],
            "sent_to_llm": facts["sent_to_llm"],
            "unjudged": facts["unjudged"],
            **{
                k: dg.MetadataValue.float(facts[k])
                for k in ("llm_calls_saved_share", "cost_saved_usd")
                if facts[k] is not None
            },
            **{
                k: facts[k]
                for k in ("batches_submitted", "batches_resumed", "batches_collected", "batches_open", "batch_pending")
                if k in facts
            },
            "judged_by_answer_model": same_model,
            "estimated_cost_usd": float(verdicts.filter(~pl.col("cache_hit"))["cost_usd"].fill_null(0).sum()),
            "by_surface": dg.MetadataValue.md(markdown_table(summary, 40)),
        }
    )


@dg.asset(group_name="support", kinds={"duckdb", "openai"}, deps=["support_verdicts"], pool=JUDGE_POOL, **DAILY)
def judge_agreement(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    judge: JudgeResource,
) -> dg.MaterializeResult:
    """A candidate judge ([judge.secondary]) on a stable hash sample of the primary's judged pairs, and how well the
    two agree (Cohen's kappa and the confusion table over yes / partial / no). Read only: support_verdicts, the
    queue and the metrics never see it. A secondary error or unparseable answer is counted apart, never agreement.
    Without [judge.secondary] it does nothing."""
    start, end = partition_days(context)
    params = {"start": start, "end": end}
    config = citegate_config.config()
    secondary = config.judge.secondary
    if secondary is None:
        return dg.MaterializeResult(metadata={"secondary_judge": "not configured ([judge.secondary])"})
    primary_base_url = judge.base_url or effective_judge_config(config.judge).base_url
    # the secondary takes the primary's concurrency: its share of the judge pool, as the primary's
    the_judge = make_secondary_judge(judge_share(config.judge, judge_slots(context)), primary_base_url=primary_base_url)
    assert the_judge is not None
    with warehouse.connect() as con:
        sampled = query(
            con, "support/agreement_pairs", {**params, "salt": AGREEMENT_SALT, "rate": secondary.sample_rate}
        ).pl()
        texts = cited_passages(con, start, end).select("citation_id", "claim", "passage")
    items = sampled.join(texts, on="citation_id", how="inner").rename({"citation_id": "item_id"})
    if set(sampled["primary_model"].unique().to_list()) == {the_judge.model}:
        context.log.warning(f"the secondary judge is the primary's model ({the_judge.model}): agreement is trivial")
    context.log.info(
        f"secondary judge {the_judge.model}: {items.height:,} of the day's judged pairs "
        f"(sample_rate {secondary.sample_rate:g})"
    )
    results, facts = judge_items(
        warehouse.connect, items, the_judge, config.judge.prices, side_by_side=judge_order(context)
    )
    rows = (
        items.select("item_id", "day", "surface", "primary_model", "primary_verdict")
        .join(results, on="item_id", how="left")
        .select(
            pl.col("item_id").alias("citation_id"),
            "day",
            "surface",
            "primary_model",
            "primary_verdict",
            pl.col("judge_model").alias("secondary_model"),
            pl.col("verdict").alias("secondary_verdict"),
            pl.col("raw_answer").alias("secondary_raw_answer"),
            "template_version",
            "cache_hit",
            "judged_at",
        )
    )
    with warehouse.connect() as con, transaction(con):
        run_script(con, "support/agreement_delete", params)
        append_frame(con, "judge_agreement", rows)
    result = agreement(zip(rows["primary_verdict"].to_list(), rows["secondary_verdict"].to_list()))
    return dg.MaterializeResult(
        metadata={
            **row_count_metadata(start, end, rows.height),
            "primary_model": ", ".join(sorted(set(rows["primary_model"].to_list()))),
            "secondary_model": the_judge.model,
            "sample_rate": secondary.sample_rate,
            "sampled_pairs": rows.height,
            "compared_pairs": result.compared,
            "agreed_pairs": result.agreed,
            "observed_agreement": result.observed,
            "cohen_kappa": result.kappa,
            "secondary_failures": result.secondary_failures,
            "secondary_errors": int((rows["secondary_verdict"] == "error").sum()),
            "secondary_calls": facts["judge_calls"],
            "secondary_cache_hits": facts["cache_hits"],
            "estimated_cost_usd": float(results.filter(~pl.col("cache_hit"))["cost_usd"].fill_null(0).sum()),
            "confusion": dg.MetadataValue.md(markdown_table(pl.DataFrame(confusion_rows(result)))),
        }
    )


def batch_client(
    cfg: JudgeConfig, the_judge: Judge, warehouse: WarehouseResource | None = None
) -> "BatchClient | None":
    """The Batch API client for [judge] mode = "batch" with an endpoint (same URL, model, key and timeouts as the
    online judge); None in online mode, or when no endpoint is configured (the offline judge needs no batch).
    It adopts a batch found by its token only if the warehouse does not hold that batch id yet."""
    if cfg.mode != "batch":
        return None
    # openai: only a batch run imports it
    from citegate_assets.lib.support.judge.batch import BatchClient, BatchSettings
    from citegate_assets.lib.support.judge.openai_judge import OpenAIJudge

    if not isinstance(the_judge, OpenAIJudge):
        return None

    def recorded() -> list[str]:
        if warehouse is None:
            return []
        with warehouse.connect() as con:
            return [batch_id for (batch_id,) in query(con, "support/batch_ids_recorded").fetchall()]

    return BatchClient(
        the_judge.settings,
        BatchSettings(
            wait_s=float(cfg.batch_wait_s),
            poll_s=float(cfg.batch_poll_s),
            poll_max_s=float(cfg.batch_poll_max_s),
            max_requests=int(cfg.batch_max_requests),
            discount=float(cfg.batch_discount),
        ),
        recorded=recorded,
    )
