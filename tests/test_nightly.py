"""the nightly run at 02:00 finds records of yesterday (to gate) and of today (not a partition
yet) in the landing folder. The scheduled run, `citegate run` without dates and `citegate run` on the
first day only each succeed, every check passes, and the data team gets a new published copy: yesterday's
citations gated, today's prompts ingested but not gated, the current week's metrics over gated days only."""

from datetime import datetime, time, timedelta, timezone

import dagster as dg
import pytest

from citegate_assets.cli import main
from citegate_assets.definitions import defs
from citegate_assets.lib.storage.warehouse import connect, query

from .helpers import CITATIONS, scenario_record, write_jsonl

TODAY = datetime.now(timezone.utc).date()
YESTERDAY = TODAY - timedelta(days=1)
N_YESTERDAY, N_TODAY = 3, 2


@pytest.fixture
def nightly(tmp_path, landing, dagster_home, monkeypatch):
    """A landing folder as it is at 02:00 UTC: yesterday's records, and today's first ones."""
    records = [
        scenario_record("plain-list", "text", request_id=f"y-{i}", logged_at=f"{YESTERDAY}T{10 + i:02d}:00:00+00:00")
        for i in range(N_YESTERDAY)
    ] + [
        scenario_record("plain-list", "text", request_id=f"t-{i}", logged_at=f"{TODAY}T00:{10 + i:02d}:00+00:00")
        for i in range(N_TODAY)
    ]
    write_jsonl(landing / "app.jsonl", records)
    monkeypatch.chdir(tmp_path)  # no citegate.toml here: built-in defaults, as a fresh deployment
    for name in (
        "CITEGATE_CONFIG",
        "CITEGATE_PUBLISHED",
        "CITEGATE_REVIEWS",
        "CITEGATE_FIRST_DAY",
        "CITEGATE_LOCK_WAIT_S",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CITEGATE_LABELS", str(tmp_path / "no-labels"))
    return landing, tmp_path / "w.duckdb"


def assert_published(warehouse):
    published = warehouse.with_name(warehouse.stem + ".published.duckdb")
    assert published.exists()
    with connect(published, read_only=True) as con:
        prompts = dict(con.sql("select day, count(*) from prompts group by day").fetchall())
        assert prompts == {YESTERDAY: N_YESTERDAY, TODAY: N_TODAY}  # today's records are ingested ...
        gated = dict(con.sql("select day, count(*) from provenance_results group by day").fetchall())
        assert gated == {YESTERDAY: N_YESTERDAY * len(CITATIONS)}  # ... but not gated
        ids = {i for (i,) in con.sql("select citation_id from provenance_results").fetchall()}
        assert {f"y-{i}#{p}" for i in range(N_YESTERDAY) for p in range(len(CITATIONS))} == ids
        assert con.sql("select count(*) from citation_queue where day = $d", params={"d": TODAY}).fetchall() == [(0,)]
        # the metrics cover gated days only: the current week's cells count yesterday's citations (if it is
        # in this week), never today's; there is no cell for a week with no gated day
        weeks = dict(
            con.sql(
                "select week_start, denominator from weekly_surface_metrics where metric = 'provenance_pass_rate'"
            ).fetchall()
        )
        week_of = lambda d: d - timedelta(days=d.weekday())  # noqa: E731
        assert weeks == {week_of(YESTERDAY): N_YESTERDAY * len(CITATIONS)}


def assert_every_check_passed(instance, run_id):
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    evaluations = {
        data.check_name: data.passed for data in (r.event_log_entry.dagster_event.event_specific_data for r in records)
    }
    assert {"denominators_reconcile", "rates_within_bounds", "every_line_accounted_for", "one_row_per_citation"} <= set(
        evaluations
    )
    assert all(evaluations.values()), evaluations


def test_scheduled_run_at_two_with_todays_records_publishes(nightly, monkeypatch):
    landing, warehouse = nightly
    monkeypatch.setenv("CITEGATE_LOGS", str(landing))  # how the schedule's runs find their folders
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(warehouse))
    d = defs()
    instance = dg.DagsterInstance.get()
    at_two = datetime.combine(TODAY, time(2, 0), tzinfo=timezone.utc)
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=at_two
    ) as context:  # `with`: it resets what it set
        [request] = d.get_schedule_def("nightly_schedule").evaluate_tick(context).run_requests or []
    assert request.partition_key == YESTERDAY.isoformat()
    result = d.resolve_job_def("nightly_job").execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        tags=request.tags,
        run_config=request.run_config or None,
        raise_on_error=False,
    )
    assert result.success
    assert "published_warehouse" in {
        e.asset_key.to_user_string() for e in result.get_asset_materialization_events() if e.asset_key is not None
    }
    assert_every_check_passed(instance, result.run_id)
    assert_published(warehouse)


def last_run_id(instance):
    [run] = instance.get_runs(limit=1)
    return run.run_id


def test_cli_run_without_dates_with_todays_records_publishes(nightly, capsys):
    landing, warehouse = nightly
    assert main(["run", "--logs", str(landing), "--warehouse", str(warehouse), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"running days {YESTERDAY} .. {YESTERDAY}" in out
    assert "no dated records found" not in out
    assert_every_check_passed(dg.DagsterInstance.get(), last_run_id(dg.DagsterInstance.get()))
    assert_published(warehouse)


def test_cli_run_on_the_first_day_only_publishes(nightly, landing, tmp_path):
    # two complete days in the landing folder, --start/--end on the first: the second is ingested, not gated
    _, warehouse = nightly
    before = YESTERDAY - timedelta(days=1)
    write_jsonl(
        landing / "app.jsonl",
        [
            scenario_record("plain-list", "text", request_id=f"y-{i}", logged_at=f"{before}T{10 + i:02d}:00:00+00:00")
            for i in range(N_YESTERDAY)
        ]
        + [
            scenario_record(
                "plain-list", "text", request_id=f"t-{i}", logged_at=f"{YESTERDAY}T00:{10 + i:02d}:00+00:00"
            )
            for i in range(N_TODAY)
        ],
    )
    day = before.isoformat()
    assert (
        main(["run", "--logs", str(landing), "--warehouse", str(warehouse), "--quiet", "--start", day, "--end", day])
        == 0
    )
    assert_every_check_passed(dg.DagsterInstance.get(), last_run_id(dg.DagsterInstance.get()))
    with connect(warehouse.with_name(warehouse.stem + ".published.duckdb"), read_only=True) as con:
        assert dict(con.sql("select day, count(*) from prompts group by day").fetchall()) == {
            before: N_YESTERDAY,
            YESTERDAY: N_TODAY,
        }
        assert dict(con.sql("select day, count(*) from provenance_results group by day").fetchall()) == {
            before: N_YESTERDAY * len(CITATIONS)
        }


def test_cli_run_on_yesterday_only_publishes_and_reconciles_gated_days_only(nightly):
    landing, warehouse = nightly
    day = YESTERDAY.isoformat()
    assert (
        main(["run", "--logs", str(landing), "--warehouse", str(warehouse), "--quiet", "--start", day, "--end", day])
        == 0
    )
    assert_every_check_passed(dg.DagsterInstance.get(), last_run_id(dg.DagsterInstance.get()))
    assert_published(warehouse)
    with connect(warehouse) as con:
        assert query(con, "metric_tables/check_reconcile").fetchall() == []  # today's 16 citations are not gated
        # a citation of a gated day without its provenance row still fails the check
        con.execute(
            "insert into citations select * replace ('y-0#99' as citation_id, 99 as position) from citations "
            "where citation_id = 'y-0#0'"
        )
        [(_, _, metric, denominator, expected)] = [
            r for r in query(con, "metric_tables/check_reconcile").fetchall() if r[2] == "provenance_pass_rate"
        ]
        assert (denominator, expected) == (N_YESTERDAY * len(CITATIONS), N_YESTERDAY * len(CITATIONS) + 1)


def test_a_failing_check_prints_its_description_and_rows(nightly, capsys, monkeypatch):
    """A blocking check that fails is named with its description and failing rows, not only its name."""
    import citegate_assets.defs.metrics as metrics_defs

    landing, warehouse = nightly
    monkeypatch.setattr(metrics_defs, "read_lock", lambda: {})  # as if no definition were preregistered
    assert main(["run", "--logs", str(landing), "--warehouse", str(warehouse), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert (
        "check metric_definitions.definitions_match_lock failed: end_to_end_pass_rate v2: not in the lock file" in err
    )
    assert "  problems:\n    - end_to_end_pass_rate v2: not in the lock file" in err
    assert "failed in metric_definitions:" in err
    assert (
        "Stack Trace" not in err and "Traceback" not in err and "STEP_FAILURE" not in err
    )  # --quiet: no Dagster log lines
    assert not warehouse.with_name(warehouse.stem + ".published.duckdb").exists()  # nothing published


def test_the_days_of_trace_files_are_planned_with_the_configs_adapter_settings(tmp_path, landing):
    """`citegate run` without dates plans the days of a trace file's calls too, reading the files with
    the run's [ingest] bounds and [adapters] settings."""
    import shutil
    from datetime import date
    from pathlib import Path

    from citegate_assets.lib.config import parse_config
    from citegate_assets.pipeline import plan_days

    fixtures = Path(__file__).parent / "fixtures" / "adapters"
    shutil.copy(fixtures / "openinference" / "phoenix_spans.jsonl", landing / "phoenix_spans.jsonl")  # 2026-11-02
    shutil.copy(fixtures / "otlp" / "otlp_attributes.jsonl", landing / "otlp_attributes.jsonl")  # 2026-11-16
    today, warehouse = date(2026, 11, 20), tmp_path / "w.duckdb"
    plan = plan_days(landing, warehouse, None, None, today, config=parse_config({}, None))
    assert (plan.start, plan.end, plan.note) == (date(2026, 11, 2), date(2026, 11, 16), "")
    # the config is what reads them: a trace file over [adapters].max_file_bytes is not read, so gives no day
    small = parse_config({"adapters": {"max_file_bytes": 1024}}, None)
    plan = plan_days(landing, warehouse, None, None, today, config=small)
    assert (plan.start, plan.end) == (date(2026, 11, 19), date(2026, 11, 19))
    assert plan.note.startswith("no valid dated records found")


# -- batch mode: a day whose batch is still open at the run's deadline is run again by the next nightly ----------


def test_the_next_nightly_reruns_the_day_whose_batch_was_pending(tmp_path, landing, dagster_home, monkeypatch):
    """Night 1 leaves day 1's batch open (its verdicts "batch pending" errors); the schedule's next tick asks for
    day 1 .. day 2 as one run, which collects the batch: day 1's verdicts are answers, nothing paid twice. A
    pending day further back than [judge] batch_pending_days is not reached for."""
    from datetime import date

    from .batch_server import ScriptedBatchServer
    from .judge_server import Reply

    day1, day2 = date(2026, 11, 2), date(2026, 11, 3)
    records = []
    for day in (day1, day2):
        for i in range(2):
            record = scenario_record("plain-list", "text", request_id=f"{day}-{i}", logged_at=f"{day}T10:0{i}:00Z")
            for n, citation in enumerate(record["citations"]):
                citation["claim"] = f"Claim {n} of {day}."  # distinct pairs per day: day 2 is not in day 1's batch
            records.append(record)
    write_jsonl(landing / "app.jsonl", records)
    warehouse, config = tmp_path / "w.duckdb", tmp_path / "citegate.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
        "[judge]\nmode = 'batch'\nbatch_wait_s = 0.2\nbatch_poll_s = 0.05\nbatch_poll_max_s = 0.05\n"
        "max_retries = 0\ntimeout_s = 5\nbatch_pending_days = 7\n"
    )
    server = ScriptedBatchServer(lambda body, i: Reply("yes")).start()
    for name, value in {
        "CITEGATE_LOGS": landing,
        "CITEGATE_WAREHOUSE": warehouse,
        "CITEGATE_CONFIG": config,
        "CITEGATE_LABELS": tmp_path / "no-labels",
        "CITEGATE_JUDGE_BASE_URL": server.base_url,
        "CITEGATE_JUDGE_MODEL": "judge-batch",
    }.items():
        monkeypatch.setenv(name, str(value))
    for name in ("CITEGATE_PUBLISHED", "CITEGATE_REVIEWS", "CITEGATE_FIRST_DAY", "CITEGATE_LOCK_WAIT_S"):
        monkeypatch.delenv(name, raising=False)
    published = warehouse.with_name(warehouse.stem + ".published.duckdb")
    d = defs()
    instance = dg.DagsterInstance.get()

    def tick(day: date) -> dg.RunRequest:
        at = datetime.combine(day, time(2, 0), tzinfo=timezone.utc)
        with dg.build_schedule_context(instance=instance, scheduled_execution_time=at) as context:
            [request] = d.get_schedule_def("nightly_schedule").evaluate_tick(context).run_requests or []
        return request

    def run(request: dg.RunRequest) -> dg.ExecuteInProcessResult:
        return d.resolve_job_def("nightly_job").execute_in_process(
            instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False
        )

    def verdicts_of(day: date) -> list[tuple]:
        with connect(published, read_only=True) as con:
            return con.sql(
                "select verdict, raw_answer from support_verdicts where day = $d order by citation_id",
                params={"d": day},
            ).fetchall()

    try:
        server.hold = True
        night1 = tick(day2)
        assert (night1.partition_key, night1.tags.get("dagster/asset_partition_range_start")) == (str(day1), None)
        assert run(night1).success
        pending = verdicts_of(day1)
        assert pending and all(v == "error" and r.startswith("batch pending: batch_0") for v, r in pending)
        # ten days on, day 1 is further back than batch_pending_days = 7: the tick asks for its yesterday only
        late = tick(date(2026, 11, 12))
        assert late.partition_key == "2026-11-11" and "dagster/asset_partition_range_start" not in late.tags
        server.hold = False
        night2 = tick(date(2026, 11, 4))
        assert night2.partition_key is None
        assert (
            night2.tags["dagster/asset_partition_range_start"],
            night2.tags["dagster/asset_partition_range_end"],
        ) == (str(day1), str(day2))
        assert run(night2).success
    finally:
        server.stop()
    after = verdicts_of(day1)
    assert len(after) == len(pending) and {v for v, _ in after} == {"yes"}
    assert {v for v, _ in verdicts_of(day2)} == {"yes"}
    # what the server received: day 1's batch once (collected, not created again), then day 2's pairs
    assert [p for p in server.paths if p == ("POST", "/v1/batches")] == [("POST", "/v1/batches")] * 2
    assert {c["metadata"]["citegate_days"] for c in server.created} == {
        f"{day1}..{day2}",
        f"{day1}..{date(2026, 11, 4)}",
    }
    day2_claims = {
        line["body"]["messages"][0]["content"].split("CLAIM:\n", 1)[1].split("\n", 1)[0]
        for line in server.lines_of("batch_1")
    }
    assert all(str(day2) in claim for claim in day2_claims)
    with connect(published, read_only=True) as con:
        assert con.sql("select count(*) from judge_batches where collected_at is null").fetchall() == [(0,)]
