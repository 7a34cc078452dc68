"""Metrics stage: preregistered definitions, weekly per-surface numbers with their lineage, the checks that keep them
honest, and the published warehouse for the data team (docs/metrics.md and docs/warehouse.md; SPEC
sections 9-10)."""

from collections.abc import Iterator

import dagster as dg
import polars as pl

from citegate_assets.defs.asset_defaults import DUCKDB_POOL
from citegate_assets.defs.partitions import run_days
from citegate_assets.defs.resources import CitegateConfigResource, LakeResource, WarehouseResource
from citegate_assets.lib.core.timestamps import UTC_TIMESTAMP, utc_now
from citegate_assets.lib.metrics.chart import png_data_uri, rates_chart_png
from citegate_assets.lib.metrics.preregistered import (
    HEADLINE,
    load_definitions,
    lock_problems,
    read_lock,
    update_metrics,
)
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.storage.publish import publish_lake
from citegate_assets.lib.storage.warehouse import append_frame, query, run_script, transaction

LOCK_CHECK = "definitions_match_lock"
BOUNDS, RECONCILE, VERSIONS = "rates_within_bounds", "denominators_reconcile", "one_definition_version_per_week"
PASS_UP_REPAIR_DOWN, SAME_MODEL, UNCALIBRATED = (
    "pass_rate_up_while_repair_rate_down",
    "judge_differs_from_answer_model",
    "high_stakes_judge_calibrated",
)


@dg.asset(
    group_name="metrics",
    kinds={"duckdb"},
    pool=DUCKDB_POOL,
    check_specs=[
        dg.AssetCheckSpec(
            LOCK_CHECK,
            asset="metric_definitions",
            blocking=True,
            description="Every definition's text matches the sha256 pinned for its (name, version) in "
            "sql/metrics/metrics.lock.json.",
        )
    ],
)
def metric_definitions(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """The metric definitions in force (sql/metrics/*.sql): name, version, description, numerator and
    denominator in words."""
    definitions = load_definitions()
    lock = read_lock()
    problems = lock_problems(definitions, lock)
    now = utc_now()
    frame = pl.DataFrame(
        [
            {
                "name": d.name,
                "version": d.version,
                "kind": d.kind,
                "description": d.description,
                "numerator": d.numerator,
                "denominator": d.denominator,
                "sha256": d.sha256,
                "locked_sha256": lock.get(d.name, {}).get(str(d.version)),
                "in_lock": lock.get(d.name, {}).get(str(d.version)) == d.sha256,
                "sql_text": d.sql,
            }
            for d in definitions
        ],
        schema_overrides={"version": pl.Int32},
    ).with_columns(recorded_at=pl.lit(now, dtype=UTC_TIMESTAMP))
    with warehouse.connect() as con, transaction(con):
        run_script(con, "metric_tables/delete_definitions")
        append_frame(con, "metric_definitions", frame)
    for p in problems:
        context.log.error(p)
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": frame.height,
            "definitions": dg.MetadataValue.md(
                markdown_table(frame.select("name", "version", "kind", "numerator", "denominator"), 20)
            ),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=LOCK_CHECK,
                passed=not problems,
                description="; ".join(problems) if problems else "all definitions match the lock",
                metadata={"problems": dg.MetadataValue.md("\n".join(f"- {p}" for p in problems) or "none")},
            )
        ],
    )


def _dep(asset: str, column: str) -> dg.TableColumnDep:
    return dg.TableColumnDep(asset_key=dg.AssetKey(asset), column_name=column)


# which upstream columns each published column is computed from (the UI draws it)
COLUMN_LINEAGE = dg.TableColumnLineage(
    deps_by_column={
        "week_start": [_dep("provenance_results", "day")],
        "surface": [_dep("provenance_results", "surface")],
        "definition_version": [_dep("metric_definitions", "version")],
        "numerator": [
            _dep("provenance_results", "reason"),
            _dep("support_verdicts", "verdict"),
            _dep("numeric_checks", "numeric_ok"),
            _dep("review_outcomes", "outcome"),
        ],
        "denominator": [
            _dep("provenance_results", "citation_id"),
            _dep("support_verdicts", "citation_id"),
            _dep("citation_queue", "citation_id"),
        ],
    }
)


def _check(name: str, description: str, blocking: bool) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(name, asset="weekly_surface_metrics", blocking=blocking, description=description)


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            "weekly_surface_metrics",
            group_name="metrics",
            kinds={"duckdb"},
            description="The weekly rates per surface (ISO weeks, Monday, UTC: the four headline rates and the "
            "unjudged share), each with numerator, "
            "denominator and definition version.",
            # support_gate_status: the uncalibrated-judge check reads it, so it must be this run's, not last night's
            deps=[
                metric_definitions,
                "provenance_results",
                "support_verdicts",
                "numeric_checks",
                "citation_queue",
                "review_outcomes",
                "support_gate_status",
            ],
        ),
        dg.AssetSpec(
            "weekly_breakdowns",
            group_name="metrics",
            kinds={"duckdb"},
            description="Weekly support rate by chunking strategy and by retrieval rank, queue volume by reason, "
            "judge errors, and both gates' pass rates by answer model.",
            deps=[
                metric_definitions,
                "support_verdicts",
                "retrievals",
                "citation_queue",
                "provenance_results",
                "citations",
            ],
        ),
        dg.AssetSpec(
            "metric_lineage",
            group_name="metrics",
            kinds={"duckdb"},
            description="Row-level lineage: for each (week, surface, metric), the citations in its denominator "
            "and their share of the numerator.",
            deps=[metric_definitions, "provenance_results", "support_verdicts", "citation_queue"],
        ),
    ],
    check_specs=[
        _check(BOUNDS, "Every rate in [0, 1]; no numerator above its denominator.", True),
        _check(
            RECONCILE,
            "Denominators equal the upstream counts: citations checked, citations judged, entries reviewed.",
            True,
        ),
        _check(VERSIONS, "No week mixes definition versions of one metric.", True),
        _check(
            PASS_UP_REPAIR_DOWN,
            "Warns when the end-to-end pass rate rises while the queue repair rate falls, week over week.",
            False,
        ),
        _check(SAME_MODEL, "Warns when citations were judged by the model that wrote the answer.", False),
        _check(UNCALIBRATED, "Warns when a high-stakes surface's judge is uncalibrated.", False),
    ],
    pool=DUCKDB_POOL,
)
def weekly_metrics(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> Iterator[dg.MaterializeResult]:
    """Weekly per-surface metrics from the preregistered definitions, with their row-level lineage."""
    definitions = load_definitions()
    now = utc_now()
    with warehouse.connect() as con:
        [(stored,)] = query(con, "metric_tables/definitions_stored").fetchall()
        if stored == 0:  # the weekly tables join the stored definitions: without them every count would be 0
            raise dg.Failure(
                "metric_definitions holds no definitions in this warehouse: materialize metric_definitions first "
                '(nightly_job and the UI\'s "Materialize all" include it; a backfill of chosen assets on a new '
                "warehouse must too)"
            )
        with transaction(con):
            weeks = update_metrics(con, definitions, now, run_days(context))
        metrics = query(con, "metric_tables/headline_for_chart").pl()
        out_of_bounds = query(con, "metric_tables/check_bounds").pl()
        unreconciled = query(con, "metric_tables/check_reconcile").pl()
        mixed = query(con, "metric_tables/check_versions").pl()
        warning = query(con, "metric_tables/check_pass_up_repair_down").pl()
        [(same_model,)] = query(con, "metric_tables/check_same_model").fetchall()
        uncalibrated = query(con, "metric_tables/check_uncalibrated").pl()
        [(n_breakdowns, n_lineage)] = query(con, "metric_tables/row_counts").fetchall()
        reconstructed = query(con, "metric_tables/reconstructed_prompts").pl()
    chart = rates_chart_png(metrics, warehouse.database_path().with_name("weekly_rates.png"))
    latest = metrics.filter(pl.col("week_start") == pl.col("week_start").max()).pivot(
        on="metric", index="surface", values="value"
    )
    warn = dg.AssetCheckSeverity.WARN
    checks = [
        _rows_check(
            BOUNDS,
            out_of_bounds,
            f"{out_of_bounds.height} rates out of bounds (outside [0, 1], or a numerator above its denominator)",
            "every rate in [0, 1]",
        ),
        _rows_check(
            RECONCILE,
            unreconciled,
            f"{unreconciled.height} (week, surface, metric) denominators differ from the upstream count of the gated "
            "days",
            "every denominator equals its upstream count (gated days)",
        ),
        _rows_check(
            VERSIONS,
            mixed,
            f"{mixed.height} (week, metric) mix definition versions",
            "one definition version per week and metric",
        ),
        _rows_check(PASS_UP_REPAIR_DOWN, warning, severity=warn),
        dg.AssetCheckResult(
            check_name=SAME_MODEL, passed=same_model == 0, severity=warn, metadata={"citations": same_model}
        ),
        _rows_check(UNCALIBRATED, uncalibrated, severity=warn, key="surfaces"),
    ]
    yield dg.MaterializeResult(
        asset_key="weekly_surface_metrics",
        metadata={
            "dagster/row_count": metrics.height,
            # only the weeks whose inputs changed are recomputed (lib/metrics/preregistered.py update_metrics)
            "weeks_recomputed": dg.MetadataValue.md(", ".join(map(str, weeks)) or "none: no input changed"),
            "latest_week": dg.MetadataValue.md(
                markdown_table(latest.select(["surface", *[m for m in HEADLINE if m in latest.columns]]), 40)
            ),
            "chart": dg.MetadataValue.md(f"![weekly rates per surface]({png_data_uri(chart)})"),
            "chart_path": dg.MetadataValue.path(str(chart)),
            "dagster/column_lineage": COLUMN_LINEAGE,
            "definitions": dg.MetadataValue.md(
                "\n".join(f"- **{d.name}** v{d.version}: {d.description}" for d in definitions if d.name in HEADLINE)
            ),
            # prompts an adapter rebuilt from captured messages, not the bytes sent (docs/adapters.md)
            "prompts_reconstructed": int(reconstructed["prompts_reconstructed"].sum() or 0),
            "prompts_reconstructed_by_surface": dg.MetadataValue.md(
                markdown_table(reconstructed) if reconstructed.height else "none: every prompt was logged as sent"
            ),
        },
        check_results=checks,
    )
    yield dg.MaterializeResult(asset_key="weekly_breakdowns", metadata={"dagster/row_count": n_breakdowns})
    yield dg.MaterializeResult(asset_key="metric_lineage", metadata={"dagster/row_count": n_lineage})


def _rows_check(
    name: str,
    rows: pl.DataFrame,
    failing: str | None = None,
    passing: str | None = None,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    key: str = "rows",
) -> dg.AssetCheckResult:
    """A check that passes when `rows` (what breaks it) is empty, showing them as a table."""
    return dg.AssetCheckResult(
        check_name=name,
        passed=rows.is_empty(),
        severity=severity,
        metadata={key: dg.MetadataValue.md(markdown_table(rows))},
        description=failing if rows.height else passing,
    )


@dg.asset(
    group_name="metrics",
    kinds={"duckdb"},
    deps=[
        "weekly_surface_metrics",
        "weekly_breakdowns",
        "metric_lineage",
        "support_gate_status",
        "judge_calibration",
        "judge_agreement",
    ],
    pool=DUCKDB_POOL,
)
def published_warehouse(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    citegate_config: CitegateConfigResource,
    lake: LakeResource,
) -> dg.MaterializeResult:
    """A small read-only DuckDB file for the data team, swapped in atomically: views over one version of each of
    the lake's Delta tables (only the changed days are written) plus copies of the small tables. An open analyst
    session never blocks the nightly run; publishing costs seconds whatever the history."""
    target = warehouse.published_path()
    root = lake.root(warehouse, citegate_config)
    facts = publish_lake(warehouse.database_path(), target, root, run_days=run_days(context))
    written = ", ".join(f"{table} {len(days)}" for table, days in facts["written"].items()) or "none"
    upgraded = f"; converted the lake to Delta tables ({facts['upgraded']} files of the earlier format removed)"
    context.log.info(
        f"published {facts['tables']} tables to {target}; partitions written: {written}"
        + (upgraded if facts["upgraded"] else "")
    )
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(target)),
            "lake": dg.MetadataValue.path(str(root)),
            "tables": facts["tables"],
            "bytes": facts["bytes"],
            "partitions_written": dg.MetadataValue.json(facts["written"]),
            "lake_versions": dg.MetadataValue.json(facts["versions"]),
            "files_removed": facts["removed"],
            "lake_files_upgraded": facts["upgraded"],
        }
    )
