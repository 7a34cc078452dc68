"""[retention] text_days (docs/retention.md): the nightly run drops the text of days older than N days, keeps hashes,
offsets, verdicts and metrics (every weekly metric recomputes to the same rows), records what it dropped, publishes
the lake without it, and refuses to re-gate a retained day."""

from datetime import timedelta

import pytest

from citegate_assets.lib.config import ConfigError, parse_config
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.metrics.preregistered import compute_metrics, load_definitions
from citegate_assets.lib.provenance.prompt_integrity import prompts_without_text
from citegate_assets.lib.retention.drop_text import TEXT_TABLES, apply_retention, retained_days
from citegate_assets.lib.storage.warehouse import SCHEMA_VERSION, connect, ensure_schema, transaction
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import as_schema_11

TODAY = utc_now().date()
VERDICTS = "select citation_id, verdict, reason, checked_at from provenance_results where day < $d order by 1"
DAYS = [TODAY - timedelta(days=n) for n in (3, 2, 1)]  # a 3-day history ending yesterday

# every column of the three metric tables but the computation time
METRIC_ROWS = {
    "weekly_surface_metrics": "select * exclude (computed_at) from weekly_surface_metrics order by all",
    "weekly_breakdowns": "select * exclude (computed_at) from weekly_breakdowns order by all",
    "metric_lineage": "select * from metric_lineage order by all",
}


def metric_rows(warehouse) -> dict[str, list]:
    """The weekly metrics recomputed from scratch over every week (lib/metrics.compute_metrics), rolled back."""
    with connect(warehouse) as con:
        con.execute("begin transaction")
        try:
            compute_metrics(con, load_definitions(), utc_now())
            return {name: con.sql(sql).fetchall() for name, sql in METRIC_ROWS.items()}
        finally:
            con.execute("rollback")


def check(result, name: str):
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == name]
    return evaluation


@pytest.fixture
def history(tmp_path, dagster_home, monkeypatch):
    landing = tmp_path / "landing"
    generate_logs(landing, days=3, requests_per_day=12, seed=5, start_date=DAYS[0].isoformat(), malformed=True)
    config = tmp_path / "citegate.toml"
    warehouse = tmp_path / "w.duckdb"
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    monkeypatch.delenv("CITEGATE_LAKE", raising=False)

    def run(text_days: int, start=DAYS[0], end=DAYS[-1]):
        config.write_text(f"[retention]\ntext_days = {text_days}\n")
        return run_range(RunPlan(start, end), landing=landing, warehouse=warehouse, config_file=config)

    return run, warehouse


def test_retention_drops_old_text_keeps_every_metric_and_refuses_to_regate(history):
    run, warehouse = history
    first = run(text_days=0)
    assert first.success
    before = metric_rows(warehouse)
    with connect(warehouse, read_only=True) as con:
        stored_before = con.sql(METRIC_ROWS["weekly_surface_metrics"]).fetchall()
        kept = con.sql(
            "select request_id, day, prompt_sha256, context_start, context_end from prompts order by 1"
        ).fetchall()
        verdicts = con.sql(VERDICTS, params={"d": DAYS[-1]}).fetchall()
        per_day = dict(con.sql("select day, count(*) from prompts group by day").fetchall())
        [(queued_old,)] = con.sql(
            "select count(*) from citation_queue where day < $d", params={"d": DAYS[-1]}
        ).fetchall()
        assert con.sql("select count(*) from text_retention").fetchall() == [(0,)]
    assert queued_old > 0  # the old days have queue entries whose claims, spans and passages must go

    second = run(text_days=1, start=DAYS[-1])  # the nightly run of yesterday, with one day of text kept
    assert second.success
    assert check(second, "prompts_match_their_sha256").passed  # text-less prompts are retained, not tampered
    with connect(warehouse, read_only=True) as con:
        text_left = con.sql(
            "select day, count(prompt_raw), count(prompt_normalized), count(answer), count(*) from prompts "
            "group by day order by day"
        ).fetchall()
        assert text_left[:2] == [(DAYS[0], 0, 0, 0, per_day[DAYS[0]]), (DAYS[1], 0, 0, 0, per_day[DAYS[1]])]
        assert text_left[2][1] == per_day[DAYS[2]]  # yesterday keeps its text
        assert prompts_without_text(con, DAYS) == per_day[DAYS[0]] + per_day[DAYS[1]]
        assert retained_days(con) == DAYS[:2]
        for table, condition in (
            ("retrievals", "text is not null or text_normalized is not null"),
            (
                "citations",
                "span is not null or claim is not null or span_normalized is not null or claim_normalized is not null",
            ),
            ("citation_queue", "claim is not null or span is not null or passage is not null"),
            ("answer_rejects", "raw_field is not null"),
        ):
            [(n,)] = con.sql(
                f"select count(*) from {table} where day < $d and ({condition})", params={"d": DAYS[-1]}
            ).fetchall()
            assert n == 0, table
            [(n,)] = con.sql(
                f"select count(*) from {table} where day = $d and ({condition})", params={"d": DAYS[-1]}
            ).fetchall()
            assert n > 0 or table == "answer_rejects", table
        # hashes, offsets and verdicts stay
        assert (
            con.sql(
                "select request_id, day, prompt_sha256, context_start, context_end from prompts order by 1"
            ).fetchall()
            == kept
        )
        assert con.sql(VERDICTS, params={"d": DAYS[-1]}).fetchall() == verdicts
        assert con.sql(METRIC_ROWS["weekly_surface_metrics"]).fetchall() == stored_before
        recorded = con.sql(
            "select day, table_name, rows_dropped, text_days from text_retention "
            "where table_name = 'prompts' order by day"
        ).fetchall()
        assert recorded == [(DAYS[0], "prompts", per_day[DAYS[0]], 1), (DAYS[1], "prompts", per_day[DAYS[1]], 1)]
        assert {t for (t,) in con.sql("select table_name from text_retention").fetchall()} <= set(TEXT_TABLES)
    assert metric_rows(warehouse) == before  # every weekly metric recomputes from what is kept

    # the published copy reads the lake's rewritten days: no text of the retained days
    with connect(warehouse.with_name("w.published.duckdb"), read_only=True) as con:
        published = con.sql("select day, count(prompt_raw), count(*) from prompts group by day order by day").fetchall()
        assert published[:2] == [(DAYS[0], 0, per_day[DAYS[0]]), (DAYS[1], 0, per_day[DAYS[1]])]
        [(spans,)] = con.sql("select count(span) from citations where day < $d", params={"d": DAYS[-1]}).fetchall()
        assert spans == 0
        assert con.sql("select count(*) from text_retention").fetchall()[0][0] > 0

    with connect(warehouse, read_only=True) as con:
        every_verdict = con.sql(VERDICTS, params={"d": TODAY}).fetchall()
    # a retained day is never re-gated: the run refuses it, naming the day and [retention]; the verdicts stand
    third = run(text_days=1)
    assert not third.success
    refused = check(third, "run_days_hold_their_text")
    assert not refused.passed
    assert str(DAYS[0]) in refused.description and "[retention]" in refused.description
    with connect(warehouse, read_only=True) as con:
        assert con.sql(VERDICTS, params={"d": TODAY}).fetchall() == every_verdict
        [(gated,)] = con.sql("select count(*) from provenance_results").fetchall()
    assert gated == len(every_verdict)


def test_retention_setting_is_checked_naming_the_file_and_key():
    assert parse_config({}, None).retention.text_days == 0  # the default keeps text forever
    assert parse_config({"retention": {"text_days": 30}}, "c.toml").retention.text_days == 30
    with pytest.raises(ConfigError, match=r"c\.toml: retention\.text_days = -1: expected an integer >= 0"):
        parse_config({"retention": {"text_days": -1}}, "c.toml")
    with pytest.raises(ConfigError, match=r"c\.toml: unknown key 'retention\.keep'"):
        parse_config({"retention": {"keep": 1}}, "c.toml")


def test_migration_10_lets_text_columns_hold_null(tmp_path):
    """A schema-9 warehouse (text columns NOT NULL, no retention tables) upgrades in place, its rows kept."""
    path = tmp_path / "old.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        as_schema_11(con)
        con.execute(
            "insert into prompts (request_id, day, logged_at, surface, answer_model, template, prompt_encoding, "
            "prompt_raw, prompt_sha256, profile_status, source_file, source_line, prompt_normalized, n_sections, "
            "normalization_version, ingested_at) values ('r1', date '2026-11-02', now(), 's', 'm', 't', 'text', "
            "'p', sha256('p'), 'ok', 'f.jsonl', 1, 'p', 0, 'n1', now())"
        )
        with transaction(con):
            for table, column in (
                ("prompts", "prompt_raw"),
                ("prompts", "prompt_normalized"),
                ("retrievals", "text"),
                ("citations", "span"),
                ("citations", "claim"),
                ("citations", "span_normalized"),
                ("citations", "claim_normalized"),
                ("citation_queue", "claim"),
                ("citation_queue", "span"),
                ("review_outcomes", "claim"),
            ):
                con.execute(f"alter table {table} alter column {column} set not null")
            con.execute("drop table text_retention")
            con.execute("drop table forgotten_requests")
            con.execute("delete from schema_version")
            con.execute("insert into schema_version values (9, now())")
    with connect(path) as con:
        ensure_schema(con)
        assert con.sql("select max(version) from schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(18,)]
        con.execute("update prompt_rows set prompt_raw = null, prompt_normalized = null")
        assert con.sql("select request_id, prompt_raw, prompt_sha256 = sha256('p') from prompts").fetchall() == [
            ("r1", None, True)
        ]
        nullable = con.sql(
            "select table_name || '.' || column_name from duckdb_columns() where not is_nullable and table_name in "
            "('prompt_rows', 'retrievals', 'citations', 'citation_queue', 'review_outcomes') and column_name in "
            "('prompt_raw', 'prompt_normalized', 'text', 'span', 'claim', 'span_normalized', 'claim_normalized')"
        ).fetchall()
        assert nullable == []
        assert con.sql("select count(*) from text_retention").fetchall() == [(0,)]


def insert_prompt(con, request_id: str, day, ingested_at) -> None:
    con.execute(
        "insert into prompt_rows (request_id, day, logged_at, surface, answer_model, template, prompt_encoding, "
        "prompt_raw, prompt_sha256, profile_status, answer, source_file, source_line, prompt_normalized, n_sections, "
        "normalization_version, ingested_at) values ($r, $d, $d::timestamptz, 's', 'm', 't', 'text', 'secret ' || $r, "
        "sha256('secret ' || $r), 'ok', 'answer', 'f.jsonl', 1, 'secret', 0, 'n1', $at)",
        {"r": request_id, "d": day, "at": ingested_at},
    )


def test_a_late_record_in_a_dropped_day_is_dropped_the_next_night_and_nothing_else_is_read_again(con):
    now = utc_now()
    old, recent = TODAY - timedelta(days=5), TODAY - timedelta(days=1)
    insert_prompt(con, "r-old", old, now - timedelta(hours=2))
    insert_prompt(con, "r-recent", recent, now - timedelta(hours=2))
    assert apply_retention(con, 2, now)[old]["prompts"] == 1
    assert apply_retention(con, 2, now + timedelta(hours=1)) == {}  # nothing new: no day is touched again
    insert_prompt(con, "r-late", old, now + timedelta(hours=2))  # lands in the dropped day the next day
    assert apply_retention(con, 2, now + timedelta(days=1), keep_days=[]) == {
        old: dict.fromkeys(TEXT_TABLES, 0) | {"prompts": 1}
    }
    assert con.sql("select request_id, prompt_raw from prompts order by 1").fetchall() == [
        ("r-late", None),
        ("r-old", None),
        ("r-recent", "secret r-recent"),
    ]
    assert con.sql("select day, table_name, rows_dropped from text_retention order by dropped_at").fetchall() == [
        (old, "prompts", 1),
        (old, "prompts", 1),
    ]


def test_a_run_planned_from_the_landing_folder_starts_after_the_retained_days(tmp_path):
    """`citegate run` without dates plans every day in the landing folder: days whose text is gone are left out
    (a run over them would be refused by the blocking check), and the note says why."""
    from datetime import date

    from citegate_assets.pipeline import plan_days

    landing = tmp_path / "landing"
    generate_logs(landing, days=3, requests_per_day=5, seed=2, malformed=False, start_date="2026-11-02")
    warehouse = tmp_path / "w.duckdb"
    with connect(warehouse) as con:
        ensure_schema(con)
    today = date(2026, 11, 10)
    assert plan_days(landing, warehouse, None, None, today=today).start == date(2026, 11, 2)
    with connect(warehouse) as con:
        con.execute("insert into text_retention values ('2026-11-02', 'prompts', 5, 3, now())")
    plan = plan_days(landing, warehouse, None, None, today=today)
    assert (plan.start, plan.end) == (date(2026, 11, 3), date(2026, 11, 4))
    assert "2026-11-02" in plan.note and "[retention] text_days" in plan.note
    named = plan_days(landing, warehouse, date(2026, 11, 2), date(2026, 11, 2), today=today)
    assert named.start == date(2026, 11, 2)  # days the user names are kept: the run's check refuses them, naming why


def test_migration_14_names_rejected_lines_clears_dropped_quotes_and_marks_the_file(tmp_path):
    """A schema-13 warehouse: its rejected lines get the request id their JSON names, the location_mismatch quotes
    of citations whose text was dropped go, and the file is marked for a rewrite (its freed blocks may hold text
    removed before)."""
    path = tmp_path / "old.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        reject = (
            "insert into ingest_rejects (source_file, line_no, reason, raw_line, rejected_at) "
            "values ('f', $n, 'r', $l, now())"
        )
        for n, line in enumerate(
            [
                '{"request_id": "r-named", "logged_at": "2026-11-02T10:00:00"}',
                '{"request_id": 7}',
                '{"request_id": "  "}',
                '{"request_id": "r-cut", "prompt": "a line cut',
                "[1, 2]",
                None,
            ],
            1,
        ):
            con.execute(reject, {"n": n, "l": line})
        citation = (
            "insert into citations (citation_id, request_id, day, position, surface, answer_model, chunk_id, span, "
            "claim, normalization_version, location_mismatch) values ($id, 'r', date '2026-11-02', 0, 's', 'm', 'c', "
            "$span, $span, 'n1', 'expected \"a quoted secret\"')"
        )
        con.execute(citation, {"id": "r#0", "span": None})  # dropped by retention before schema 14
        con.execute(citation, {"id": "r#1", "span": "kept"})
        con.execute("insert into text_retention values (date '2026-11-02', 'citations', 1, 3, now())")
        con.execute("drop table pending_file_rewrite")
        con.execute("delete from schema_version")
        con.execute("insert into schema_version values (13, now())")
    with connect(path) as con:
        ensure_schema(con)
        assert con.sql("select line_no, request_id from ingest_rejects order by line_no").fetchall() == [
            (1, "r-named"),
            (2, None),
            (3, None),
            (4, None),
            (5, None),
            (6, None),
        ]
        assert con.sql("select citation_id, location_mismatch from citations order by 1").fetchall() == [
            ("r#0", None),
            ("r#1", 'expected "a quoted secret"'),
        ]
        assert con.sql("select why from pending_file_rewrite").fetchall() == [("text removed before schema 14",)]


def test_a_batch_errors_quoting_its_lines_go_with_their_day_or_their_request(con):
    """judge_batches.detail holds the provider's errors, which a gateway may quote the lines sent in: cleared when
    retention drops a day the batch judged, or when forget takes a request whose claim it judged."""
    from citegate_assets.lib.retention.forget import forget_in_warehouse

    now = utc_now()
    old, recent = TODAY - timedelta(days=5), TODAY - timedelta(days=1)
    for request_id, day in (("r-old", old), ("r-recent", recent), ("r-forgotten", recent)):
        insert_prompt(con, request_id, day, now - timedelta(hours=2))
        con.execute(
            "insert into citations (citation_id, request_id, day, position, surface, answer_model, chunk_id, span, "
            "claim, span_normalized, claim_normalized, normalization_version) values ($r || '#0', $r, $d, 0, 's', "
            "'m', 'c', 'a span', 'claim of ' || $r, 'a span', 'claim of ' || $r, 'n1')",
            {"r": request_id, "d": day},
        )
        con.execute(
            "insert into judge_batches (batch_id, judge_model, template_version, day_start, day_end, requests, "
            "input_file_id, status, detail, submitted_at, checked_at) values ('b-' || $r, 'j', 'v1', $d, $d + 1, 1, "
            "'f', 'failed', 'line 1: \"claim of ' || $r || '\" is invalid', now(), now())",
            {"r": request_id, "d": day},
        )
        con.execute(
            "insert into judge_batch_items values ('b-' || $r, 'k-' || $r, 'p', sha256('claim of ' || $r))",
            {"r": request_id},
        )
    assert apply_retention(con, 2, now)[old]["judge_batches"] == 1
    forget_in_warehouse(con, ["r-forgotten"], by="t", reason=None, now=now)
    assert con.sql("select batch_id, status, detail is null from judge_batches order by 1").fetchall() == [
        ("b-r-forgotten", "failed", True),
        ("b-r-old", "failed", True),
        ("b-r-recent", "failed", False),
    ]
