"""citegate's Dagster definitions: every stage's assets and checks, the nightly schedule, one executor."""

from __future__ import annotations

import dagster as dg

from citegate_assets.defs.automation import nightly_job, nightly_schedule
from citegate_assets.defs.calibration import hand_labels, judge_calibration, support_gate_status
from citegate_assets.defs.ingest import ingest_prompt_log, prompt_log, prompts_match_their_sha256
from citegate_assets.defs.metrics import metric_definitions, published_warehouse, weekly_metrics
from citegate_assets.defs.provenance import provenance_results
from citegate_assets.defs.resources import JudgeResource, WarehouseResource
from citegate_assets.defs.review import best_evidence, citation_queue, review_outcomes
from citegate_assets.defs.support import numeric_checks, support_sample, support_verdicts
from citegate_assets.lib.private import private_umask

private_umask()  # the code location's processes write run storage and the warehouse: owner-only files


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(
        assets=[
            prompt_log,
            ingest_prompt_log,
            provenance_results,
            support_sample,
            numeric_checks,
            support_verdicts,
            hand_labels,
            judge_calibration,
            support_gate_status,
            best_evidence,
            review_outcomes,
            citation_queue,
            metric_definitions,
            weekly_metrics,
            published_warehouse,
        ],
        asset_checks=[prompts_match_their_sha256],
        jobs=[nightly_job],
        schedules=[nightly_schedule],
        resources={"warehouse": WarehouseResource(), "judge": JudgeResource()},
        # one process per run: DuckDB allows a single writer, and the steps share it in turn
        executor=dg.in_process_executor,
    )
