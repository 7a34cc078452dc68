"""Support stage, calibration: hand labels (own: sampled from this warehouse's traffic; reference: any other), the
judge's false pass and false fail rates on them (own labels weighted back to the traffic's mix, per surface and
pooled), and which gates are enforced (on own labels only) and what each costs in true citations failed."""

import dagster as dg
import polars as pl

from citegate_assets.defs.asset_defaults import DUCKDB_POOL
from citegate_assets.defs.resources import CitegateConfigResource, JudgeResource, ReviewFilesResource, WarehouseResource
from citegate_assets.lib.calibration.label_log import labeller_agreement
from citegate_assets.lib.calibration.labels import read_labels, read_labels_empty
from citegate_assets.lib.calibration.own_labels import classify, own_citations, strata_counts, weights
from citegate_assets.lib.calibration.rates import (
    JUDGED_WINDOW_DAYS,
    OWN,
    REFERENCE,
    calibration_summary,
    confusion,
    gate_status,
    tier_summary,
)
from citegate_assets.lib.core.terminal import safe
from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP, utc_now
from citegate_assets.lib.reporting import gate_summary, markdown_table
from citegate_assets.lib.storage.warehouse import append_frame, query, run_script, transaction
from citegate_assets.lib.support.cascade import judge_tiered
from citegate_assets.lib.support.judge.prompt import TEMPLATE_VERSION
from citegate_assets.lib.support.judge.tiers import TO_LLM

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
    "effective_negatives": pl.Float64,
    "effective_positives": pl.Float64,
    "label_origin": pl.String,
    "surface": pl.String,
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
    "labels": pl.String,
    "pooled": pl.Boolean,
    "own_labels": pl.Int32,
    "own_negatives": pl.Int32,
    "next_step": pl.String,
    "judge_offline": pl.Boolean,
}
AGREEMENT_SCHEMA = {
    "first_labeller": pl.String,
    "second_labeller": pl.String,
    "pairs": pl.Int32,
    "agreed": pl.Int32,
    "kappa": pl.Float64,
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
    """Hand-labelled (claim, passage) pairs: the labels folder (own labels replayed from `citegate label` and the
    review page's Label tab, reference labels as they are) plus reviewers' accepts (label yes, reference); each
    marked own or reference; bad rows go to label_rejects; two labellers' agreement on own pairs to
    label_agreement."""
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
            labels = pl.concat([labels, accepted], how="diagonal_relaxed")
        labels = classify(con, labels)
    own = labels.filter(pl.col("origin") == OWN)
    agreement = pl.DataFrame(
        [vars(a) for a in labeller_agreement(own.select("labeller", "pair_key", "label").iter_rows())],
        schema={"first": pl.String, "second": pl.String, "pairs": pl.Int32, "agreed": pl.Int32, "kappa": pl.Float64},
    ).rename({"first": "first_labeller", "second": "second_labeller"})
    stored = labels.with_columns(
        ingested_at=pl.lit(now, dtype=UTC_TIMESTAMP),
        labelled_at=pl.col("labelled_at").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_zone="UTC", strict=False),
    )
    with warehouse.connect() as con, transaction(con):
        con.register("new_labels", stored.to_arrow())
        con.register(
            "new_label_rejects",
            rejects.with_columns(rejected_at=pl.lit(now, dtype=UTC_TIMESTAMP)).to_arrow(),
        )
        con.register(
            "new_label_agreement", agreement.with_columns(computed_at=pl.lit(now, dtype=UTC_TIMESTAMP)).to_arrow()
        )
        run_script(con, "support/replace_labels")
        for name in ("new_labels", "new_label_rejects", "new_label_agreement"):
            con.unregister(name)
    counts = labels.group_by("origin", "label").len().sort("origin", "label")
    context.log.info(
        f"{labels.height} hand labels from {path} ({own.height} own, {labels.height - own.height} reference; "
        f"{rejects.height} rejected)"
    )
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": labels.height,
            "labels_path": str(path),
            "own_labels": own.height,
            "rejected_rows": rejects.height,
            "labels": dg.MetadataValue.md(markdown_table(counts)),
            "labeller agreement (own pairs)": dg.MetadataValue.md(markdown_table(agreement)),
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
    fail rate, each with its 95% interval, per tier (the screen's, the LLM judge's on what the screen left, and the
    cascade's combined; one tier when only one judge is configured, with each tier's coverage), each on the reference
    labels (unweighted) and on the own labels weighted back to the traffic's mix, pooled and per surface."""
    config = citegate_config.config()
    tiers = judge.tiers(config)
    with warehouse.connect() as con:
        labels = query(con, "support/calibration_labels").pl()
    items = labels.select(item_id="label_id", passage="passage_normalized", claim="claim_normalized")
    results, facts = judge_tiered(warehouse.connect, items, tiers, config.judge.prices)
    pairs = labels.select("label_id", "origin", "pair_key", "citation_id", human_label="label").join(
        results.select(label_id="item_id", judge_verdict="verdict", screen_verdict="screen_verdict"), on="label_id"
    )
    now = utc_now()
    cal = config.calibration

    def summarized(frame: pl.DataFrame, origin: str, surface: str | None) -> list[dict]:
        rows = []
        for tier, part in tier_pairs(frame, tiers.tier).items():
            extra = {**tier_summary(part), "tier": tier, "label_origin": origin, "surface": surface}
            rows += [
                {**row, **extra}
                for row in calibration_summary(
                    part,
                    cal.false_pass_threshold,
                    cal.min_negatives,
                    false_fail_threshold=cal.false_fail_threshold,
                    min_positives=cal.min_positives,
                )
            ]
        return rows

    reference = pairs.filter(pl.col("origin") != OWN)
    own = pairs.filter(pl.col("origin") == OWN)
    rows = summarized(reference, REFERENCE, None) if reference.height or not own.height else []
    if own.height:
        with warehouse.connect() as con:
            strata = own_citations(con, own["citation_id"].unique().to_list())
            counts = strata_counts(con)
        weighted = weights(own.join(strata.drop("day"), on="citation_id", how="inner"), counts)
        rows += summarized(weighted, OWN, None)
        for surface in sorted(weighted["stratum_surface"].unique().to_list()):
            rows += summarized(weighted.filter(pl.col("stratum_surface") == surface), OWN, surface)
    summary = pl.DataFrame(rows, schema=CALIBRATION_SCHEMA).with_columns(
        judge_model=pl.lit(tiers.model),
        template_version=pl.lit(TEMPLATE_VERSION),
        computed_at=pl.lit(now, dtype=UTC_TIMESTAMP),
    )
    counted = [(origin, part) for origin, part in ((REFERENCE, reference), (OWN, own)) if part.height]
    matrix = pl.concat(
        [
            confusion(by_tier).with_columns(label_origin=pl.lit(origin), tier=pl.lit(tier))
            for origin, part in counted or [(REFERENCE, pairs)]
            for tier, by_tier in tier_pairs(part, tiers.tier).items()
        ]
    ).with_columns(judge_model=pl.lit(tiers.model), template_version=pl.lit(TEMPLATE_VERSION))
    params = {"judge_model": tiers.model, "template_version": TEMPLATE_VERSION}
    with warehouse.connect() as con, transaction(con):
        run_script(con, "support/delete_calibration", params)
        append_frame(con, "judge_calibration", summary)
        append_frame(con, "judge_calibration_confusion", matrix)
    pivot = (
        matrix.filter(pl.col("tier") == tiers.tier)
        .pivot(on="judge_verdict", index=["label_origin", "human_label"], values="n")
        .fill_null(0)
        .sort("label_origin", "human_label")
    )
    pooled = summary.filter((pl.col("scope") == "no_or_partial") & pl.col("surface").is_null())
    headline = pooled.filter(pl.col("tier") == tiers.tier)
    main = headline.row(0, named=True)
    for row in headline.iter_rows(named=True):
        context.log.info(
            f"{tiers.model} on {row['labels']} {row['label_origin']} labels: {row['false_passes']} false passes "
            f"of {row['negatives']} no/partial, {row['false_fails']} false fails of {row['positives']} yes"
        )
    by_tier = pooled.select(
        "tier",
        "label_origin",
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
    decisive = summary.filter(pl.col("tier") == tiers.tier)
    shown = ["label_origin", "surface", "scope", "negatives", "effective_negatives", "false_passes"]
    return dg.MaterializeResult(
        metadata={
            "judge_model": tiers.model,
            "template_version": TEMPLATE_VERSION,
            "labels": labels.height,
            "own_labels": own.height,
            "judge_calls": facts["judge_calls"],
            "llm_calls": facts["llm_calls"],
            "cache_hits": facts["cache_hits"],
            **_rate_metadata(main),
            "tiers (no or partial negatives)": dg.MetadataValue.md(markdown_table(by_tier)),
            "false_pass_rate": dg.MetadataValue.md(
                markdown_table(
                    decisive.select(*shown, "false_pass_rate", "wilson_low", "wilson_high", "calibrated"), 40
                )
            ),
            "false_fail_rate (human yes, judge not yes)": dg.MetadataValue.md(
                markdown_table(
                    decisive.filter(pl.col("scope") == "no_or_partial").select(
                        "label_origin",
                        "surface",
                        "positives",
                        "effective_positives",
                        "false_fails",
                        "false_fail_rate",
                        "false_fail_low",
                        "false_fail_high",
                        "false_fail_threshold",
                        "too_strict",
                    ),
                    40,
                )
            ),
            "confusion (rows: human, columns: judge)": dg.MetadataValue.md(markdown_table(pivot)),
        }
    )


def tier_pairs(judged: pl.DataFrame, tier: str) -> dict[str, pl.DataFrame]:
    """The labels with each tier's verdict as judge_verdict (other columns, an own label's weight say, kept). A
    cascade: the screen's own answers on every label, the LLM judge's on the labels the screen left to it, and the
    combined verdicts; one tier alone: its verdicts."""
    if tier != "cascade":
        return {tier: judged}
    return {
        "screen": judged.with_columns(judge_verdict=pl.col("screen_verdict")),
        "llm": judged.filter(pl.col("screen_verdict").is_in(list(TO_LLM))),
        "cascade": judged,
    }


# support_verdicts: judged_per_week counts this run's verdicts too, not only last night's
@dg.asset(group_name="support", kinds={"duckdb"}, deps=[judge_calibration, "support_verdicts"], pool=DUCKDB_POOL)
def support_gate_status(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    judge: JudgeResource,
) -> dg.MaterializeResult:
    """Per surface: is its support gate enforced (the judge calibrated under the threshold on enough own negatives,
    the surface's or pooled) or not, which labels that rests on (own, reference), what it costs (the false fail
    rate, too_strict, the true citations it queues a week) and the next step."""
    config = citegate_config.config()
    tiers = judge.tiers(config)
    model = tiers.model
    offline = tiers.llm is None
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
    status = gate_status(
        [(n, config.surface(n).stakes) for n in names],
        summary,
        judged,
        passed,
        judge_offline=offline,
        min_negatives=config.calibration.min_negatives,
    )
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
        "labels",
        "pooled",
        "too_strict",
        "false_pass_upper",
        "false_fail_rate",
        "false_fail_low",
        "false_fail_high",
        "judged_per_week",
        "judged_yes_rate",
        "extra_queue_per_week",
    )
    line = gate_summary(list(frame.iter_rows(named=True)))
    context.log.info(line)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": frame.height,
            "summary": line,
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
