"""End to end through Dagster: the nightly job over a partition range into a temporary DuckDB file."""

from datetime import date
from pathlib import Path

import dagster as dg

from citegate_assets.cli import main
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, plan_days, run_range

from .helpers import CITATIONS, PROFILE_ENCODINGS, scenario_record, write_jsonl


def _landing(landing):
    """Two days, every profile and encoding, plus one bad line per file."""
    for day in ("2026-11-02", "2026-11-03"):
        records = [
            scenario_record(t, e, request_id=f"{day}-{i}", logged_at=f"{day}T{10 + i:02d}:00:00+00:00")
            for i, (t, e) in enumerate(PROFILE_ENCODINGS)
        ]
        write_jsonl(landing / f"{day}.jsonl", records, raw_lines=['{"cut": '])
    return len(PROFILE_ENCODINGS) * 2


def test_nightly_job_end_to_end(tmp_path, landing, dagster_home, monkeypatch):
    # the project's hand labels (citegate.toml names none: the demo draws its own): reference labels, so every
    # check passes but the warning that no high-stakes gate is enforced (only own labels enforce one)
    monkeypatch.setenv("CITEGATE_LABELS", str(Path(__file__).resolve().parents[1] / "labels"))
    n_records = _landing(landing)
    warehouse = tmp_path / "w.duckdb"
    plan = plan_days(landing, warehouse, None, None, today=date(2026, 11, 30))
    assert (plan.start, plan.end) == (date(2026, 11, 2), date(2026, 11, 3))
    result = run_range(plan, landing=landing, warehouse=warehouse, config_file=None)
    assert result.success
    with connect(warehouse, read_only=True) as con:
        assert con.sql("select count(*) from prompts").fetchall() == [(n_records,)]
        assert con.sql("select count(*), count(distinct citation_id) from provenance_results").fetchall() == [
            (n_records * len(CITATIONS), n_records * len(CITATIONS))
        ]
        by_reason = dict(con.sql("select reason, count(*) from provenance_results group by reason").fetchall())
        expected: dict = {}
        for _, _, reason in CITATIONS:
            expected[reason] = expected.get(reason, 0) + n_records
        assert by_reason == expected
        assert con.sql("select reason, count(*) from ingest_rejects group by reason").fetchall() == [
            ("invalid_json", 2)
        ]
        # every provenance row joins back to its citation and its prompt
        assert con.sql(
            "select count(*) from provenance_results r join citations c using (citation_id) "
            "join prompts p on p.request_id = c.request_id"
        ).fetchall() == [(n_records * len(CITATIONS),)]
    # the materializations carry row counts per partition and the blocking checks passed
    mats = {
        (m.asset_key.to_user_string(), m.partition): m
        for m in result.get_asset_materialization_events()
        for m in [m.materialization]
    }
    meta = mats[("provenance_results", "2026-11-02")].metadata
    assert meta["rows_in_run_range"].value == n_records * len(CITATIONS)
    assert f"| 2026-11-02 | {n_records // 2 * len(CITATIONS)} |" in meta["rows_by_day"].value
    assert "dagster/row_count" not in meta  # it would overstate each day of a range run
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert (
        checks["every_line_accounted_for"] and checks["one_row_per_citation"] and checks["prompts_match_their_sha256"]
    )
    assert [name for name, passed in checks.items() if not passed] == ["high_stakes_judge_calibrated"]
    [uncalibrated] = [e for e in result.get_asset_check_evaluations() if e.check_name == "high_stakes_judge_calibrated"]
    assert uncalibrated.severity == dg.AssetCheckSeverity.WARN
    assert "uncalibrated (reference labels only)" in uncalibrated.metadata["surfaces"].value


def test_rerun_changes_no_row_count(tmp_path, landing, dagster_home):
    _landing(landing)
    warehouse = tmp_path / "w.duckdb"
    plan = RunPlan(date(2026, 11, 2), date(2026, 11, 3))
    counts = []
    for _ in range(2):
        assert run_range(plan, landing=landing, warehouse=warehouse, config_file=None).success
        with connect(warehouse, read_only=True) as con:
            counts.append(
                [
                    con.sql(f"select count(*) from {t}").fetchall()[0][0]
                    for t in ("prompts", "citations", "provenance_results", "ingest_rejects", "ingested_files")
                ]
            )
    assert counts[0] == counts[1]


def test_run_is_recorded_in_the_dagster_instance(tmp_path, landing, dagster_home):
    _landing(landing)
    result = run_range(
        RunPlan(date(2026, 11, 2), date(2026, 11, 3)),
        landing=landing,
        warehouse=tmp_path / "w.duckdb",
        config_file=None,
    )
    instance = dg.DagsterInstance.get()
    assert instance.get_run_by_id(result.run_id).is_success
    event = instance.get_latest_materialization_event(dg.AssetKey("provenance_results"))
    assert event is not None and event.asset_materialization.partition == "2026-11-03"


def test_cli_run_prints_summary(tmp_path, landing, dagster_home, capsys):
    _landing(landing)
    code = main(["run", "--logs", str(landing), "--warehouse", str(tmp_path / "w.duckdb"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "running days 2026-11-02 .. 2026-11-03" in out
    assert "span_truncated" in out and "invalid_json" in out
    assert "gated by this run: 2026-11-02 .. 2026-11-03" in out  # the run's days, never the exclusive end
    assert "2026-11-04" not in out


def test_cli_run_rejects_bad_config_naming_the_key(tmp_path, landing, capsys):
    bad = tmp_path / "c.toml"
    bad.write_text("[surfaces.web]\nstakess = 'high'\n")
    code = main(["run", "--logs", str(landing), "--warehouse", str(tmp_path / "w.duckdb"), "--config", str(bad)])
    assert code == 2
    assert "unknown key 'surfaces.web.stakess'" in capsys.readouterr().err


def test_plan_clamps_today_and_handles_empty_landing(tmp_path, landing):
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text", logged_at="2026-11-30T01:00:00Z")])
    plan = plan_days(landing, tmp_path / "w.duckdb", None, None, today=date(2026, 11, 30))
    assert (plan.start, plan.end) == (date(2026, 11, 29), date(2026, 11, 29))
    (landing / "a.jsonl").write_text("not json\n")
    plan = plan_days(landing, tmp_path / "w.duckdb", None, None, today=date(2026, 11, 30))
    assert plan.end == date(2026, 11, 29) and "accounted" in plan.note
