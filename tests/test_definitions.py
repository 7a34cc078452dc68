"""The Dagster definitions: they load, group assets by stage, and schedule the previous day at 02:00 UTC."""

from datetime import datetime, timezone

import dagster as dg

from citegate_assets.definitions import defs


def test_definitions_load_and_validate():
    d = defs()
    dg.Definitions.validate_loadable(d)
    job = d.resolve_job_def("nightly_job")
    assert job.executor_def.name == "in_process"


ASSETS = {
    "prompt_log",
    "prompts",
    "prompt_sections",
    "retrievals",
    "citations",
    "ingest_rejects",
    "answer_rejects",
    "prompt_conflicts",
    "ingested_files",
    "provenance_results",
    "support_sample",
    "numeric_checks",
    "support_verdicts",
    "judge_agreement",
    "hand_labels",
    "judge_calibration",
    "support_gate_status",
    "best_evidence",
    "review_outcomes",
    "citation_queue",
    "metric_definitions",
    "weekly_surface_metrics",
    "weekly_breakdowns",
    "metric_lineage",
    "published_warehouse",
    "text_retention",
}
CHECKS = {
    "ingested_files:every_line_accounted_for",
    "prompts:prompts_match_their_sha256",
    "prompts:run_days_hold_their_text",
    "provenance_results:one_row_per_citation",
    "metric_definitions:definitions_match_lock",
    "weekly_surface_metrics:rates_within_bounds",
    "weekly_surface_metrics:denominators_reconcile",
    "weekly_surface_metrics:one_definition_version_per_week",
    "weekly_surface_metrics:pass_rate_up_while_repair_rate_down",
    "weekly_surface_metrics:judge_differs_from_answer_model",
    "weekly_surface_metrics:high_stakes_judge_calibrated",
}


def test_the_defs_folder_registers_exactly_these_definitions_once():
    """definitions.py loads defs/ as a folder: every module's objects, none missing, none twice."""
    d = defs()
    graph = d.resolve_asset_graph()
    keys = [k.to_user_string() for k in d.resolve_all_asset_keys()]
    assert sorted(keys) == sorted(ASSETS)  # a list: a key registered twice would show
    assert {f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys} == CHECKS
    assert {job.name for job in d.resolve_all_job_defs()} == {"nightly_job", "__ASSET_JOB"}
    assert [s.name for s in d.schedules or []] == ["nightly_schedule"] and not d.sensors
    assert set(d.resources or {}) == {"warehouse", "lake", "landing", "citegate_config", "review_files", "judge"}
    # a whole-night asset waits for the one DuckDB slot; a daily one takes turns at the file instead (the open
    # lock), and the daily steps that call the judge share the judge pool
    judge_steps = {"support_verdicts", "best_evidence", "judge_agreement"}
    for key in graph.get_all_asset_keys():
        name, node = key.to_user_string(), graph.get(key)
        expected = (
            set()
            if name == "prompt_log"
            else {"citegate_judge"}
            if name in judge_steps
            else set()
            if node.partitions_def is not None
            else {"citegate_duckdb"}
        )
        assert (node.pools or set()) == expected, name


def test_an_installed_wheel_loads_the_same_definitions_without_pyproject(monkeypatch):
    """A wheel has no pyproject.toml: the defs module itself is the root, with the same result."""
    import citegate_assets.definitions as definitions

    monkeypatch.setattr(definitions, "source_checkout", lambda: None)
    d = definitions.defs()
    assert sorted(k.to_user_string() for k in d.resolve_all_asset_keys()) == sorted(ASSETS)
    assert d.resolve_job_def("nightly_job").executor_def.name == "in_process"


def test_assets_grouped_by_stage_with_descriptions():
    graph = defs().resolve_asset_graph()
    groups = {key.to_user_string(): graph.get(key).group_name for key in graph.get_all_asset_keys()}
    assert groups["prompt_log"] == "ingest"
    for table in (
        "prompts",
        "prompt_sections",
        "retrievals",
        "citations",
        "ingest_rejects",
        "answer_rejects",
        "prompt_conflicts",
        "ingested_files",
    ):
        assert groups[table] == "ingest"
    assert groups["provenance_results"] == "provenance"
    for asset in (
        "support_sample",
        "numeric_checks",
        "support_verdicts",
        "judge_agreement",
        "hand_labels",
        "judge_calibration",
        "support_gate_status",
    ):
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
    assert parents("judge_agreement") == {"support_verdicts"}  # a candidate judge: read only; only publishing waits
    children = [k for k in graph.get_all_asset_keys() if dg.AssetKey("judge_agreement") in graph.get(k).parent_keys]
    assert children == [dg.AssetKey("published_warehouse")]


def test_nightly_schedule_runs_previous_day_at_two_utc(dagster_home):
    d = defs()
    schedule = d.get_schedule_def("nightly_schedule")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    at_two = datetime(2026, 11, 10, 2, 0, tzinfo=timezone.utc)
    # both as context managers: the schedule context's instance sets dagster's current defs-state storage,
    # and left open it outlives the test instance (a later Definitions load then hits a dead weakref)
    with (
        dg.instance_for_test() as instance,
        dg.build_schedule_context(instance=instance, scheduled_execution_time=at_two) as context,
    ):
        [request] = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-11-09"


def test_weekly_metrics_depend_on_this_runs_gate_status():
    """Its high_stakes_judge_calibrated check reads support_gate_status: it must run after it, not see last night's."""
    graph = defs().resolve_asset_graph()
    assert dg.AssetKey("support_gate_status") in graph.get(dg.AssetKey("weekly_surface_metrics")).parent_keys
    job = defs().resolve_job_def("nightly_job")
    order = [node.name for node in job.graph.nodes_in_topological_order]
    assert order.index("support_gate_status") < order.index("weekly_metrics")


def test_partitions_start_at_the_first_day_not_at_the_ingest_bound():
    from datetime import date

    from citegate_assets.defs.partitions import FIRST_DAY, daily_partitions, first_partition_day
    from citegate_assets.lib.ingest.records import EARLIEST_DAY

    assert first_partition_day({}, today=date(2026, 11, 30)) == date(
        2025, 1, 1
    )  # default: January 1 of the previous year
    assert first_partition_day({"CITEGATE_FIRST_DAY": "2026-10-01"}) == date(2026, 10, 1)
    for bad in ("yesterday", "2019-12-31"):
        try:
            first_partition_day({"CITEGATE_FIRST_DAY": bad})
        except ValueError as exc:
            assert "CITEGATE_FIRST_DAY" in str(exc)
        else:
            raise AssertionError(bad)
    keys = daily_partitions.get_partition_keys(current_time=datetime(2026, 11, 30, 12, tzinfo=timezone.utc))
    assert keys[0] == FIRST_DAY.isoformat() and FIRST_DAY > EARLIEST_DAY
    assert len(keys) < 800  # not 2,525 days since 2020-01-01


def test_a_range_before_the_first_partition_is_refused_before_anything_runs(tmp_path, landing, dagster_home, capsys):
    from datetime import timedelta

    from citegate_assets.cli import main
    from citegate_assets.defs.partitions import FIRST_DAY
    from citegate_assets.pipeline import RunPlan, run_range, within_partitions

    from .helpers import scenario_record, write_jsonl

    old = FIRST_DAY - timedelta(days=3)
    warehouse = tmp_path / "w.duckdb"
    try:
        run_range(RunPlan(old, old), landing=landing, warehouse=warehouse, config_file=None)
    except ValueError as exc:
        assert f"before the first daily partition {FIRST_DAY}: set CITEGATE_FIRST_DAY={old}" in str(exc)
    else:
        raise AssertionError("a range Dagster would run and then fail on was accepted")
    assert not warehouse.exists()
    # the CLI: named days are refused with what to set; days found in the landing folder start at the first partition
    write_jsonl(landing / "old.jsonl", [scenario_record("plain-list", "text", logged_at=f"{old}T10:00:00Z")])
    assert (
        main(
            [
                "run",
                "--logs",
                str(landing),
                "--warehouse",
                str(warehouse),
                "--start",
                old.isoformat(),
                "--end",
                old.isoformat(),
            ]
        )
        == 2
    )
    assert "CITEGATE_FIRST_DAY" in capsys.readouterr().err
    plan = within_partitions(RunPlan(old, FIRST_DAY + timedelta(days=1)), dates_given=False)
    assert (plan.start, plan.end) == (FIRST_DAY, FIRST_DAY + timedelta(days=1))
    assert "ingested, not gated" in plan.note
