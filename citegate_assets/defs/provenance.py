"""Provenance stage: the deterministic gate on every citation (docs/provenance-gate.md; SPEC section 4)."""

from datetime import timedelta

import dagster as dg

from citegate_assets.defs.asset_defaults import DAILY
from citegate_assets.defs.partitions import partition_days, row_count_metadata
from citegate_assets.defs.resources import WarehouseResource
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.reporting import markdown_table
from citegate_assets.lib.storage.warehouse import query

COVERAGE_CHECK = "one_row_per_citation"


@dg.asset(
    group_name="provenance",
    kinds={"duckdb"},
    deps=["citations", "prompts", "prompt_sections", "retrievals"],
    **DAILY,
    check_specs=[
        dg.AssetCheckSpec(
            COVERAGE_CHECK,
            asset="provenance_results",
            blocking=True,
            description="Every citation of the partition has exactly one provenance row, and no row lacks a citation.",
        )
    ],
)
def provenance_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Provenance verdict per citation: was the cited span in the cited chunk's section of the prompt as sent?"""
    start, end = partition_days(context)
    params = {"start": start, "end": end}
    with warehouse.connect() as con:
        n = check_provenance(con, start, end)
        by_reason = query(con, "provenance/reasons_by_surface", params).pl()
        [(missing, duplicated, orphaned)] = query(con, "provenance/coverage", params).fetchall()
        preview = query(con, "provenance/preview", params).pl()
        by_day = dict(query(con, "provenance/rows_by_day", params).fetchall())
    # end is exclusive (partition_days): name the last day the run gated, not the day after it
    context.log.info(f"provenance: {n:,} citations checked for {start} .. {end - timedelta(days=1)}")
    return dg.MaterializeResult(
        metadata={
            **row_count_metadata(start, end, n, by_day),
            "reasons_by_surface": dg.MetadataValue.md(markdown_table(by_reason, max_rows=60)),
            "failures_preview": dg.MetadataValue.md(markdown_table(preview)),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=COVERAGE_CHECK,
                passed=missing == 0 and duplicated == 0 and orphaned == 0,
                metadata={
                    "citations_without_row": missing,
                    "citations_with_several_rows": duplicated,
                    "rows_without_citation": orphaned,
                },
            )
        ],
    )
