"""The metrics stage inside the nightly job: numbers with definitions, the chart, blocking checks that
stop the run (changed definition, tampered prompt), and a published copy analysts can hold open."""

import shutil
import subprocess
import sys
import textwrap
from datetime import date, timedelta

import pytest

import citegate_assets.lib.metrics.preregistered as metrics_module
from citegate_assets.cli import main
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import copy_run, run_once

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 10))


@pytest.fixture
def run(tmp_path, dagster_home, monkeypatch):
    landing = tmp_path / "landing"
    generate_logs(landing, days=9, requests_per_day=20, seed=3)
    warehouse = tmp_path / "w.duckdb"
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))

    def _run():
        return run_range(PLAN, landing=landing, warehouse=warehouse, config_file=None)

    return _run, warehouse


@pytest.fixture(scope="module")
def first_run_result(tmp_path_factory):
    """One successful nightly run per module, for the tests that read it or start after one (files only are
    copied): (its folder, its result)."""
    root = tmp_path_factory.mktemp("metrics-first-run")
    generate_logs(root / "landing", days=9, requests_per_day=20, seed=3)
    return root, run_once(root, PLAN)


@pytest.fixture(scope="module")
def first_run(first_run_result):
    return first_run_result[0]


@pytest.fixture
def after_a_run(first_run, run, tmp_path):
    """`run`, with its first successful run already done (a copy of the module's)."""
    copy_run(first_run, tmp_path)
    return run


def checks(result):
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_metrics_chart_and_checks_after_a_run(first_run_result):
    root, result = first_run_result
    warehouse = root / "w.duckdb"
    with connect(warehouse, read_only=True) as con:
        per_cell = con.sql(
            "select week_start, surface, count(*), count(distinct metric) from weekly_surface_metrics group by 1, 2"
        ).fetchall()
        weeks = {w for w, *_ in per_cell}
    assert weeks == {date(2026, 11, 2), date(2026, 11, 9)}  # Mondays
    assert all(n == 5 and m == 5 for *_, n, m in per_cell)  # the four rates and support_unjudged_rate
    evaluations = checks(result)
    for blocking in (
        "definitions_match_lock",
        "rates_within_bounds",
        "denominators_reconcile",
        "one_definition_version_per_week",
        "prompts_match_their_sha256",
    ):
        assert evaluations[blocking].passed, blocking
    [mat] = [
        m.materialization
        for m in result.get_asset_materialization_events()
        if m.asset_key.to_user_string() == "weekly_surface_metrics"
    ]
    assert mat.metadata["chart"].value.startswith("![weekly rates per surface](data:image/png;base64,")
    assert "provenance_pass_rate" in mat.metadata["latest_week"].value
    assert (warehouse.with_name("weekly_rates.png")).stat().st_size > 10_000


def test_changed_definition_without_bump_fails_the_run_naming_the_metric(run, tmp_path, monkeypatch):
    go, warehouse = run
    folder = tmp_path / "metrics"
    shutil.copytree(metrics_module.METRICS_DIR, folder)
    path = folder / "provenance_pass_rate.sql"
    path.write_text(path.read_text().replace("when r.reason = 'ok'", "when r.reason in ('ok', 'span_missing')"))
    monkeypatch.setattr(metrics_module, "METRICS_DIR", folder)
    monkeypatch.setattr(metrics_module, "LOCK_FILE", folder / "metrics.lock.json")
    result = go()
    assert not result.success
    check = checks(result)["definitions_match_lock"]
    assert not check.passed
    assert "provenance_pass_rate v1: definition text changed without a version bump" in check.description
    materialized = {m.asset_key.to_user_string() for m in result.get_asset_materialization_events()}
    assert "weekly_surface_metrics" not in materialized and "published_warehouse" not in materialized


def test_tampered_prompt_fails_the_blocking_check_naming_it(after_a_run):
    go, warehouse = after_a_run  # one run done
    with connect(warehouse) as con:
        [(rid,)] = con.sql("select request_id from prompts order by request_id limit 1").fetchall()
        con.execute(  # inline text comes first (sql/text/prompts_view.sql): the row now reads a tampered prompt
            "update prompt_rows set prompt_raw = (select prompt_raw from prompts where request_id = $r) || ' ' "
            "where request_id = $r",
            {"r": rid},
        )
    result = go()
    assert not result.success
    check = checks(result)["prompts_match_their_sha256"]
    assert not check.passed and rid in check.description


def test_deleted_prompts_fail_the_blocking_check(after_a_run):
    go, warehouse = after_a_run  # one run done
    with connect(warehouse) as con:
        con.execute("delete from prompt_rows where request_id in (select request_id from prompts order by 1 limit 2)")
    result = go()
    assert not result.success
    check = checks(result)["prompts_match_their_sha256"]
    assert not check.passed and "stored prompts went down" in check.description


def test_analyst_session_on_the_published_copy_never_blocks_the_nightly_run(after_a_run, tmp_path):
    go, warehouse = after_a_run  # one run done
    published = warehouse.with_name("w.published.duckdb")
    ready = tmp_path / "ready"
    analyst = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import duckdb, pathlib, time
                con = duckdb.connect({str(published)!r}, read_only=True)
                before = con.sql("select count(*) from prompts").fetchall()[0][0]
                pathlib.Path({str(ready)!r}).write_text("ok")
                deadline = time.time() + 600  # a safety net only: the test ends the session (ready.done)
                while not pathlib.Path({str(ready)!r} + ".done").exists() and time.time() < deadline:
                    assert con.sql("select count(*) from prompts").fetchall()[0][0] == before
                    time.sleep(0.05)
                print(before)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(200):
            if ready.exists():
                break
            import time

            time.sleep(0.05)
        assert ready.exists(), "the analyst session did not start"
        result = go()  # the nightly run, with the analyst connected to the published copy
        assert result.success
        assert analyst.poll() is None  # still connected while the run published
    finally:
        (tmp_path / "ready.done").write_text("")
        out, _ = analyst.communicate(timeout=30)
    assert analyst.returncode == 0 and int(out.strip()) > 0
    with connect(published, read_only=True) as con:
        assert con.sql("select count(*) from weekly_surface_metrics").fetchall()[0][0] > 0


def test_metrics_and_trace_commands(after_a_run, capsys):
    go, warehouse = after_a_run  # one run done
    assert main(["metrics", "--weeks", "2"]) == 0
    out = capsys.readouterr().out
    for name, version in {d.name: d.version for d in metrics_module.load_definitions()}.items():
        if name in metrics_module.HEADLINE:
            assert f"{name} v{version} = " in out
    assert "Week of 2026-11-02" in out and "Week of 2026-11-09" in out
    with connect(warehouse, read_only=True) as con:
        [(surface, numerator, denominator)] = con.sql(
            "select surface, numerator, denominator from weekly_surface_metrics where metric = 'provenance_pass_rate' "
            "and week_start = '2026-11-02' order by surface limit 1"
        ).fetchall()
    assert (
        main(
            ["trace", "--metric", "provenance_pass_rate", "--surface", surface, "--week", "2026-11-05", "--limit", "3"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"behind it: {denominator} citations" in out and f"{int(numerator)} count toward the numerator" in out
    assert main(["trace", "--metric", "nope", "--surface", surface, "--week", "2026-11-05"]) == 2


def _by_week_surface_model(rows):
    """{(week_start, surface, answer_model): [passed, total]} from (day, surface, answer_model, passed) rows."""
    out: dict = {}
    for day, surface, model, passed in rows:
        cell = out.setdefault((day - timedelta(days=day.weekday()), surface, model), [0, 0])
        cell[0] += passed
        cell[1] += 1
    return out


def test_pass_rates_by_answer_model_match_the_gate_tables(first_run):
    """Both gates' weekly pass rates per answer model, recomputed here in Python from the gate tables (not from the
    definitions' SQL), equal the weekly_breakdowns rows; the generated logs' answer models pass at different rates."""
    with connect(first_run / "w.duckdb", read_only=True) as con:
        model_of = dict(con.sql("select citation_id, answer_model from citations").fetchall())
        provenance = [
            (day, surface, model_of[cid], reason == "ok")
            for cid, day, surface, reason in con.sql(
                "select citation_id, day, surface, reason from provenance_results"
            ).fetchall()
        ]
        support = [
            (day, surface, model_of[cid], verdict == "yes" and numeric_ok)
            for cid, day, surface, verdict, numeric_ok in con.sql(
                "select citation_id, day, surface, verdict, numeric_ok from support_verdicts"
            ).fetchall()
            if verdict not in ("error", "unjudged")  # a failed judge call, or no judge decided: in no denominator
        ]
        got = {
            metric: {(w, s, b): (n, d, v) for w, s, b, n, d, v in rows}
            for metric in ("provenance_pass_rate_by_answer_model", "support_pass_rate_by_answer_model")
            for rows in [
                con.sql(
                    "select week_start, surface, breakdown, numerator, denominator, value from weekly_breakdowns "
                    "where metric = $m",
                    params={"m": metric},
                ).fetchall()
            ]
        }
    for metric, rows in (
        ("provenance_pass_rate_by_answer_model", provenance),
        ("support_pass_rate_by_answer_model", support),
    ):
        expected = _by_week_surface_model(rows)
        assert expected and set(got[metric]) == set(expected), metric
        for key, (passed, total) in expected.items():
            assert got[metric][key] == (float(passed), total, pytest.approx(passed / total)), (metric, key)
        # across the whole run, at least two answer models pass this gate at different rates
        per_model: dict = {}
        for (_, _, model), (passed, total) in expected.items():
            acc = per_model.setdefault(model, [0, 0])
            acc[0] += passed
            acc[1] += total
        rates = {model: passed / total for model, (passed, total) in per_model.items()}
        assert len(rates) >= 2 and len(set(rates.values())) >= 2, (metric, rates)


def test_weekly_metrics_without_stored_definitions_stop_naming_metric_definitions(after_a_run, dagster_home):
    """A backfill of chosen assets on a warehouse whose metric_definitions was never materialized: the weekly
    metrics stop and say what to materialize, instead of writing zero counts for their checks to trip on."""
    import dagster as dg

    from citegate_assets.definitions import defs

    go, warehouse = after_a_run
    with connect(warehouse) as con:
        con.execute("delete from metric_definitions")
        [(before,)] = con.sql("select count(*) from weekly_surface_metrics").fetchall()
    result = (
        defs()
        .resolve_job_def("nightly_job")
        .execute_in_process(
            instance=dg.DagsterInstance.get(),
            asset_selection=[dg.AssetKey(k) for k in ("weekly_surface_metrics", "weekly_breakdowns", "metric_lineage")],
            raise_on_error=False,
        )
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "metric_definitions holds no definitions" in failure.event_specific_data.error.message
    with connect(warehouse, read_only=True) as con:
        assert con.sql("select count(*) from weekly_surface_metrics").fetchall() == [(before,)]  # left as it was
