"""Support stage, calibration: hand labels, the judge's false pass and false fail rates on them, and which gates are
enforced and what each costs in true citations failed."""

import dagster as dg
import polars as pl

from citegate_assets.lib.calibration import (
    JUDGED_WINDOW_DAYS,
    calibration_summary,
    confusion,
    gate_status,
    tier_summary,
)
from citegate_assets.lib.cascade import judge_tiered
from citegate_assets.lib.judge.prompt import TEMPLATE_VERSION
from citegate_assets.lib.judge.tiers import TO_LLM
from citegate_assets.lib.labels import read_labels, read_labels_empty
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.terminal import safe
from citegate_assets.lib.timestamps import UTC_TIMESTAMP, utc_now
from citegate_assets.lib.warehouse import append_frame, query, run_script, transaction

from .asset_defaults import DUCKDB_POOL
from .resources import CitegateConfigResource, JudgeResource, ReviewFilesResource, WarehouseResource

CALIBRATION_SCHEMA = {
    "scope": pl.String,
    "labels": pl.Int32,
    "negatives": pl.Int32,
    "false_passes": pl.Int32,
    "false_pass_rate": pl.Float64,
    "wilson_low": pl.Float64,
    "wilson_high": pl.Float64,
    "judge_errors": pl.Int32,
    "threshold": pl.Float64,
    "min_negatives": pl.Int32,
    "calibrated": pl.Boolean,
    "positives": pl.Int32,
    "false_fails": pl.Int32,
    "false_fail_rate": pl.Float64,
    "false_fail_low": pl.Float64,
    "false_fail_high": pl.Float64,
    "false_fail_threshold": pl.Float64,
    "min_positives": pl.Int32,
    "too_strict": pl.Boolean,
    "tier": pl.String,
    "decided": pl.Int32,
    "coverage": pl.Float64,
    "said_no_on_yes": pl.Int32,
}
GATE_SCHEMA = {
    "surface": pl.String,
    "stakes": pl.String,
    "status": pl.String,
    "why": pl.String,
    "false_pass_upper": pl.Float64,
    "negatives": pl.Int32,
    "positives": pl.Int32,
    "false_fails": pl.Int32,
    "false_fail_rate": pl.Float64,
    "false_fail_low": pl.Float64,
    "false_fail_high": pl.Float64,
    "too_strict": pl.Boolean,
    "judged_per_week": pl.Float64,
    "extra_queue_per_week": pl.Float64,
    "judged_yes_rate": pl.Float64,
}


def _rate_metadata(main: dict) -> dict:
    """Both rates as numbers the UI can plot across materializations (a missing value is left out, not null)."""
    values = {
        "false_pass_rate (no or partial)": main["false_pass_rate"],
        "false_pass_ci95_high": main["wilson_high"],
        "false_fail_rate": main["false_fail_rate"],
        "false_fail_ci95_low": main["false_fail_low"],
        "false_fail_ci95_high": main["false_fail_high"],
        "recall (1 - false_fail_rate)": None if main["false_fail_rate"] is None else 1 - main["false_fail_rate"],
    }
    return {k: dg.MetadataValue.float(v) for k, v in values.items() if v is not None}


@dg.asset(group_name="support", kinds={"duckdb"}, deps=["review_outcomes"], pool=DUCKDB_POOL)
def hand_labels(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    review_files: ReviewFilesResource,
) -> dg.MaterializeResult:
    """Hand-labelled (claim, passage) pairs: the labels folder plus reviewers' accepts (label yes);
    bad rows go to label_rejects."""
    path = review_files.labels_path(warehouse, citegate_config)
    if path.exists():
        labels, rejects = read_labels(path)
    else:  # no labels yet: every support gate is reported uncalibrated, the nightly run goes on
        context.log.warning(f"{path}: no hand labels found; support gates stay uncalibrated")
        labels, rejects = read_labels_empty()
    now = utc_now()
    with warehouse.connect() as con:
        accepted = query(con, "support/accepted_reviews").pl()
    if accepted.height:
        labels = pl.concat([labels, accepted.select(labels.columns)])
    with warehouse.connect() as con, transaction(con):
        con.register("new_labels", labels.with_columns(ingested_at=pl.lit(now, dtype=UTC_TIMESTAMP)).to_arrow())
        con.register(
            "new_label_rejects",
            rejects.with_columns(rejected_at=pl.lit(now, dtype=UTC_TIMESTAMP)).to_arrow(),
        )
        run_script(con, "support/replace_labels")
        con.unregister("new_labels")
        con.unregister("new_label_rejects")
    counts = labels.group_by("label").len().sort("label")
    context.log.info(f"{labels.height} hand labels from {path} ({rejects.height} rejected)")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": labels.height,
            "labels_path": str(path),
            "rejected_rows": rejects.height,
            "labels": dg.MetadataValue.md(markdown_table(counts)),
            "rejects": dg.MetadataValue.md(
                markdown_table(rejects.select("source_file", "line_no", "reason", "detail"))
            ),
        }
    )


@dg.asset(group_name="support", kinds={"duckdb", "openai"}, deps=[hand_labels], pool=DUCKDB_POOL)
def judge_calibration(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    judge: JudgeResource,
) -> dg.MaterializeResult:
    """The configured judge on the hand labels (through the cache): confusion matrix, false pass rate and false
    fail rate, each with its 95% interval, per tier: the screen's, the LLM judge's on what the screen left, and the
    cascade's combined (one tier when only one judge is configured), with each tier's coverage."""
    config = citegate_config.config()
    tiers = judge.tiers(config)
    with warehouse.connect() as con:
        labels = query(con, "support/calibration_labels").pl()
    items = labels.select(item_id="label_id", passage="passage_normalized", claim="claim_normalized")
    results, facts = judge_tiered(warehouse.connect, items, tiers, config.judge.prices)
    judged = labels.select("label_id", human_label="label").join(
        results.select(label_id="item_id", judge_verdict="verdict", screen_verdict="screen_verdict"), on="label_id"
    )
    now = utc_now()
    cal = config.calibration
    summaries, matrices = [], []
    for tier, pairs in tier_pairs(judged, tiers.tier).items():
        rows = calibration_summary(
            pairs,
            cal.false_pass_threshold,
            cal.min_negatives,
            false_fail_threshold=cal.false_fail_threshold,
            min_positives=cal.min_positives,
        )
        extra = tier_summary(pairs)
        summaries.append(pl.DataFrame([{**r, **extra, "tier": tier} for r in rows], schema=CALIBRATION_SCHEMA))
        matrices.append(confusion(pairs).with_columns(tier=pl.lit(tier)))
    summary = pl.concat(summaries).with_columns(
        judge_model=pl.lit(tiers.model),
        template_version=pl.lit(TEMPLATE_VERSION),
        computed_at=pl.lit(now, dtype=UTC_TIMESTAMP),
    )
    matrix = pl.concat(matrices).with_columns(
        judge_model=pl.lit(tiers.model), template_version=pl.lit(TEMPLATE_VERSION)
    )
    params = {"judge_model": tiers.model, "template_version": TEMPLATE_VERSION}
    with warehouse.connect() as con, transaction(con):
        run_script(con, "support/delete_calibration", params)
        append_frame(con, "judge_calibration", summary)
        append_frame(con, "judge_calibration_confusion", matrix)
    decisive = matrix.filter(pl.col("tier") == tiers.tier)
    pivot = decisive.pivot(on="judge_verdict", index="human_label", values="n").fill_null(0)
    main = summary.filter((pl.col("tier") == tiers.tier) & (pl.col("scope") == "no_or_partial")).row(0, named=True)
    context.log.info(
        f"{tiers.model} on {labels.height} hand labels: {main['false_passes']} false passes of "
        f"{main['negatives']} no/partial, {main['false_fails']} false fails of {main['positives']} yes"
    )
    by_tier = summary.filter(pl.col("scope") == "no_or_partial").select(
        "tier",
        "labels",
        "decided",
        "coverage",
        "negatives",
        "false_passes",
        "false_pass_rate",
        "wilson_high",
        "positives",
        "false_fails",
        "said_no_on_yes",
        "false_fail_rate",
    )
    return dg.MaterializeResult(
        metadata={
            "judge_model": tiers.model,
            "template_version": TEMPLATE_VERSION,
            "labels": labels.height,
            "judge_calls": facts["judge_calls"],
            "llm_calls": facts["llm_calls"],
            "cache_hits": facts["cache_hits"],
            **_rate_metadata(main),
            "tiers (no or partial negatives)": dg.MetadataValue.md(markdown_table(by_tier)),
            "false_pass_rate": dg.MetadataValue.md(
                markdown_table(
                    summary.filter(pl.col("tier") == tiers.tier).select(
                        "scope",
                        "negatives",
                        "false_passes",
                        "false_pass_rate",
                        "wilson_low",
                        "wilson_high",
                        "calibrated",
                    )
                )
            ),
            "false_fail_rate (human yes, judge not yes)": dg.MetadataValue.md(
                markdown_table(
                    summary.filter((pl.col("tier") == tiers.tier) & (pl.col("scope") == "no_or_partial")).select(
                        "positives",
                        "false_fails",
                        "false_fail_rate",
                        "false_fail_low",
                        "false_fail_high",
                        "false_fail_threshold",
                        "too_strict",
                    )
                )
            ),
            "confusion (rows: human, columns: judge)": dg.MetadataValue.md(markdown_table(pivot)),
        }
    )


def tier_pairs(judged: pl.DataFrame, tier: str) -> dict[str, pl.DataFrame]:
    """(human_label, judge_verdict) per tier. A cascade: the screen's own answers on every label, the LLM judge's on
    the labels the screen left to it, and the combined verdicts; one tier alone: its verdicts."""
    if tier != "cascade":
        return {tier: judged.select("human_label", "judge_verdict")}
    return {
        "screen": judged.select("human_label", judge_verdict="screen_verdict"),
        "llm": judged.filter(pl.col("screen_verdict").is_in(list(TO_LLM))).select("human_label", "judge_verdict"),
        "cascade": judged.select("human_label", "judge_verdict"),
    }


# support_verdicts: judged_per_week counts this run's verdicts too, not only last night's
@dg.asset(group_name="support", kinds={"duckdb"}, deps=[judge_calibration, "support_verdicts"], pool=DUCKDB_POOL)
def support_gate_status(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    judge: JudgeResource,
) -> dg.MaterializeResult:
    """Per surface: is its support gate enforced (judge calibrated under the threshold on enough negatives) or not,
    and what it costs: the false fail rate, too_strict, and the true citations it queues a week."""
    config = citegate_config.config()
    tiers = judge.tiers(config)
    model = tiers.model
    with warehouse.connect() as con:
        rel = query(
            con,
            "support/calibration_of_judge",
            {"judge_model": model, "template_version": TEMPLATE_VERSION, "tier": tiers.tier},
        )
        cols, rows = rel.columns, rel.fetchall()
        seen = [s for (s,) in query(con, "support/cited_surfaces").fetchall()]
        volume = query(con, "support/judged_per_week", {"window_days": JUDGED_WINDOW_DAYS}).fetchall()
    summary = [dict(zip(cols, r)) for r in rows]
    names = [n for n in config.surfaces if n != "default"] + [s for s in seen if s not in config.surfaces]
    judged = {surface: float(n) for surface, n, _ in volume} if volume else None
    passed = {surface: yes_rate for surface, _, yes_rate in volume}
    status = gate_status([(n, config.surface(n).stakes) for n in names], summary, judged, passed)
    now = utc_now()
    frame = pl.DataFrame(status, schema=GATE_SCHEMA).with_columns(
        judge_model=pl.lit(model),
        template_version=pl.lit(TEMPLATE_VERSION),
        computed_at=pl.lit(now, dtype=UTC_TIMESTAMP),
    )
    with warehouse.connect() as con, transaction(con):
        run_script(con, "support/delete_gate_status")
        append_frame(con, "support_gate_status", frame)
    shown = frame.select(
        "surface",
        "stakes",
        "status",
        "too_strict",
        "false_pass_upper",
        "false_fail_rate",
        "false_fail_low",
        "false_fail_high",
        "judged_per_week",
        "judged_yes_rate",
        "extra_queue_per_week",
    )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": frame.height,
            "enforced": frame.filter(pl.col("status") == "enforced").height,
            "too_strict": frame.filter(pl.col("too_strict").fill_null(False)).height,
            "extra_queue_per_week (all surfaces)": dg.MetadataValue.float(
                float(frame["extra_queue_per_week"].fill_null(0).sum())
            ),
            "status": dg.MetadataValue.md(markdown_table(shown)),
            "why": dg.MetadataValue.md(
                "\n".join(
                    f"- {safe(r['surface'])} ({r['status']}): {safe(r['why'])}" for r in frame.iter_rows(named=True)
                )
            ),
        }
    )
