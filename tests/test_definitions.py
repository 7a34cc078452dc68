"""The Dagster definitions: they load, group assets by stage, and schedule the previous day at 02:00 UTC."""

from datetime import datetime, timezone

import dagster as dg

from citegate_assets.definitions import defs


def test_definitions_load_and_validate():
    d = defs()
    dg.Definitions.validate_loadable(d)
    job = d.resolve_job_def("nightly_job")
    assert job.executor_def.name == "in_process"


def test_assets_grouped_by_stage_with_descriptions():
    graph = defs().resolve_asset_graph()
    groups = {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}
    assert groups["prompt_log"] == "ingest"
    for table in ("prompts", "prompt_sections", "retrievals", "citations", "ingest_rejects", "answer_rejects", "prompt_conflicts", "ingested_files"):
        assert groups[table] == "ingest"
    assert groups["provenance_results"] == "provenance"
    for asset in ("support_sample", "numeric_checks", "support_verdicts", "hand_labels", "judge_calibration", "support_gate_status"):
        assert groups[asset] == "support"
    for key in graph.get_all_asset_keys():
        assert graph.get(key).description, f"{key} has no description"


def test_lineage_from_prompt_log_to_support_verdicts():
    graph = defs().resolve_asset_graph()
    parents = lambda name: {k.to_user_string() for k in graph.get(dg.AssetKey(name)).parent_keys}  # noqa: E731
    assert "prompt_log" in parents("citations")
    assert "citations" in parents("provenance_results")
    assert "provenance_results" in parents("support_sample") and "provenance_results" in parents("numeric_checks")
    assert parents("support_verdicts") == {"support_sample", "numeric_checks"}
    assert parents("judge_calibration") == {"hand_labels"}


def test_nightly_schedule_runs_previous_day_at_two_utc(dagster_home):
    d = defs()
    schedule = d.get_schedule_def("nightly_schedule")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    with dg.instance_for_test() as instance:
        context = dg.build_schedule_context(instance=instance, scheduled_execution_time=datetime(2026, 11, 10, 2, 0, tzinfo=timezone.utc))
        [request] = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-11-09"
