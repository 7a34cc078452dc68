"""Metrics on small hand-built tables, answers computed by hand; checks that fail when they should;
trace returns exactly the rows counted."""

from datetime import date, datetime, timezone

import pytest

from citegate_assets.lib.metrics.preregistered import (
    DefinitionError,
    compute_metrics,
    load_definitions,
    lock_problems,
    parse_definition,
    read_lock,
    update_lock,
)
from citegate_assets.lib.storage.warehouse import connect, ensure_schema, query

W1, W2 = date(2026, 11, 2), date(2026, 11, 9)
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)

# citation: (day, surface, provenance reason, numeric_ok, verdict or None, chunk rank, chunking)
CITATIONS = {
    "c1": (date(2026, 11, 3), "web", "ok", True, "yes", 1, "fixed"),
    "c2": (date(2026, 11, 3), "web", "ok", True, "partial", 2, "semantic"),
    "c3": (date(2026, 11, 3), "web", "ok", True, None, 1, "fixed"),  # sampled out
    "c4": (date(2026, 11, 3), "web", "ok", False, None, 1, "fixed"),  # sampled out, wrong number
    "c5": (date(2026, 11, 3), "web", "span_missing", None, None, 1, "fixed"),
    "c6": (date(2026, 11, 3), "web", "ok", True, "error", 1, "fixed"),  # judge failed
    "l1": (date(2026, 11, 4), "legal", "ok", True, "yes", 1, "fixed"),
    "l2": (date(2026, 11, 4), "legal", "ok", False, "yes", 7, "fixed"),
    "s1": (date(2026, 11, 5), "search", "ok", True, None, 1, "fixed"),  # stakes off
    "s2": (date(2026, 11, 5), "search", "fabricated_id", None, None, 1, "fixed"),
    "w1": (date(2026, 11, 10), "web", "ok", True, "yes", 1, "fixed"),
    "w2": (date(2026, 11, 10), "web", "ok", True, "partial", 1, "semantic"),
}
QUEUE = {
    "c2": "support_partial",
    "c4": "numeric_mismatch",
    "c5": "span_missing",
    "l2": "numeric_mismatch",
    "s2": "fabricated_id",
    "w2": "support_partial",
}
# the model that wrote each citation's answer: model-a unless named here
MODEL_B = {"c2", "c5", "l2", "w2"}
# review history: (citation, outcome, minute); the latest per citation is in force
REVIEWS = [("c2", "repair", 1), ("c4", "accept", 2), ("c5", "repair", 3), ("c5", "accept", 4), ("w2", "accept", 5)]


def build(con):
    con.execute(
        "create table citations "
        "(citation_id varchar, request_id varchar, day date, surface varchar, chunk_id varchar, answer_model varchar)"
    )
    con.execute("create table retrievals (request_id varchar, chunk_id varchar, rank integer, chunking varchar)")
    con.execute(
        "create table provenance_results "
        "(citation_id varchar, request_id varchar, day date, surface varchar, reason varchar)"
    )
    con.execute("create table numeric_checks (citation_id varchar, day date, numeric_ok boolean)")
    con.execute(
        "create table support_verdicts (citation_id varchar, request_id varchar, day date, surface varchar, "
        "verdict varchar, numeric_ok boolean, judge_model varchar, judge_is_answer_model boolean, answer_model varchar)"
    )
    con.execute(
        "create table citation_queue "
        "(citation_id varchar, request_id varchar, day date, surface varchar, reason varchar)"
    )
    con.execute(
        "create table review_outcomes "
        "(citation_id varchar, outcome varchar, reviewed_at timestamptz, is_latest boolean)"
    )
    con.execute(
        "create table prompts (request_id varchar, day date, prompt_raw varchar, prompt_sha256 varchar, "
        "source_file varchar, source_line bigint, logged_at timestamptz)"
    )
    ensure_schema(con)  # the metric tables
    for cid, (day, surface, reason, numeric_ok, verdict, rank, chunking) in CITATIONS.items():
        rid = f"r-{cid}"
        model = "model-b" if cid in MODEL_B else "model-a"
        con.execute("insert into citations values (?, ?, ?, ?, ?, ?)", [cid, rid, day, surface, f"k-{cid}", model])
        con.execute("insert into retrievals values (?, ?, ?, ?)", [rid, f"k-{cid}", rank, chunking])
        con.execute("insert into provenance_results values (?, ?, ?, ?, ?)", [cid, rid, day, surface, reason])
        con.execute("insert into prompts values (?, ?, 'p', sha256('p'), 'f.jsonl', 1, now())", [rid, day])
        if numeric_ok is not None:
            con.execute("insert into numeric_checks values (?, ?, ?)", [cid, day, numeric_ok])
        if verdict is not None:
            con.execute(
                "insert into support_verdicts values (?, ?, ?, ?, ?, ?, 'judge-j', false, ?)",
                [cid, rid, day, surface, verdict, numeric_ok, model],
            )
        if cid in QUEUE:
            con.execute("insert into citation_queue values (?, ?, ?, ?, ?)", [cid, rid, day, surface, QUEUE[cid]])
    latest = {}
    for cid, _outcome, minute in REVIEWS:
        latest[cid] = minute
    for cid, outcome, minute in REVIEWS:
        con.execute(
            "insert into review_outcomes values (?, ?, ?, ?)",
            [cid, outcome, datetime(2026, 11, 20, 0, minute, tzinfo=timezone.utc), latest[cid] == minute],
        )
    definitions = load_definitions()
    for d in definitions:
        con.execute(
            "insert into metric_definitions values (?, ?, ?, ?, ?, ?, ?, ?, true, ?, now())",
            [d.name, d.version, d.kind, d.description, d.numerator, d.denominator, d.sha256, d.sha256, d.sql],
        )
    compute_metrics(con, definitions, NOW)
    return con


@pytest.fixture
def metrics_con(tmp_path):
    with connect(tmp_path / "m.duckdb") as con:
        yield build(con)


def cell(con, metric, surface, week):
    return con.sql(
        "select numerator, denominator, value from weekly_surface_metrics "
        "where metric = $m and surface = $s and week_start = $w",
        params={"m": metric, "s": surface, "w": week},
    ).fetchall()[0]


def test_provenance_pass_rate(metrics_con):
    assert cell(metrics_con, "provenance_pass_rate", "web", W1) == (5.0, 6, pytest.approx(5 / 6))
    assert cell(metrics_con, "provenance_pass_rate", "search", W1) == (1.0, 2, 0.5)


def test_support_pass_rate_excludes_errors_and_needs_numbers(metrics_con):
    assert cell(metrics_con, "support_pass_rate", "web", W1) == (1.0, 2, 0.5)  # c1 yes, c2 partial; c6 error excluded
    assert cell(metrics_con, "support_pass_rate", "legal", W1) == (1.0, 2, 0.5)  # l2 said yes but a number is missing
    assert cell(metrics_con, "support_pass_rate", "search", W1) == (0.0, 0, None)  # zero denominator: NULL, not 0


def test_end_to_end_counts_unjudged_at_the_sample_pass_rate(metrics_con):
    # web W1: c1 1 + c2 0 + c3 0.5 (sampled out, judged rate 1/2) + c4 0 (wrong number) + c5 0
    # + c6 0.5 (error → unjudged)
    assert cell(metrics_con, "end_to_end_pass_rate", "web", W1) == (2.0, 6, pytest.approx(2 / 6))
    assert cell(metrics_con, "end_to_end_pass_rate", "legal", W1) == (1.0, 2, 0.5)
    # stakes off: nothing judged, so the unjudged passing citation has no rate: NULL, never a guess
    assert cell(metrics_con, "end_to_end_pass_rate", "search", W1) == (None, 2, None)


def test_queue_repair_rate_uses_the_latest_outcome(metrics_con):
    assert cell(metrics_con, "queue_repair_rate", "web", W1) == (
        1.0,
        3,
        pytest.approx(1 / 3),
    )  # c2 repair; c4, c5 accepted
    assert cell(metrics_con, "queue_repair_rate", "legal", W1) == (0.0, 0, None)
    assert cell(metrics_con, "queue_repair_rate", "web", W2) == (0.0, 1, 0.0)


def test_breakdowns(metrics_con):
    rows = {
        (m, s, str(w), b): (n, d, v)
        for m, s, w, b, n, d, v in metrics_con.sql(
            "select metric, surface, week_start, breakdown, numerator, denominator, value from weekly_breakdowns"
        ).fetchall()
    }
    assert rows[("support_rate_by_chunking", "web", "2026-11-02", "fixed")] == (1.0, 1, 1.0)
    assert rows[("support_rate_by_chunking", "web", "2026-11-02", "semantic")] == (0.0, 1, 0.0)
    assert rows[("support_rate_by_rank", "legal", "2026-11-02", "6+")] == (0.0, 1, 0.0)
    assert rows[("support_rate_by_rank", "legal", "2026-11-02", "1")] == (1.0, 1, 1.0)
    assert rows[("queue_volume_by_reason", "web", "2026-11-02", "numeric_mismatch")] == (1.0, None, 1.0)
    assert rows[("judge_errors", "web", "2026-11-02", "judge-j")] == (1.0, 3, pytest.approx(1 / 3))


def test_breakdowns_by_answer_model(metrics_con):
    rows = {
        (m, s, str(w), b): (n, d, v)
        for m, s, w, b, n, d, v in metrics_con.sql(
            "select metric, surface, week_start, breakdown, numerator, denominator, value from weekly_breakdowns "
            "where metric like '%_by_answer_model'"
        ).fetchall()
    }
    prov, sup = "provenance_pass_rate_by_answer_model", "support_pass_rate_by_answer_model"
    # web W1: model-a wrote c1 c3 c4 c6 (all ok), model-b c2 (ok) and c5 (span_missing)
    assert rows[(prov, "web", "2026-11-02", "model-a")] == (4.0, 4, 1.0)
    assert rows[(prov, "web", "2026-11-02", "model-b")] == (1.0, 2, 0.5)
    assert rows[(prov, "search", "2026-11-02", "model-a")] == (1.0, 2, 0.5)
    assert rows[(prov, "web", "2026-11-09", "model-b")] == (1.0, 1, 1.0)
    # web W1 judged: c1 (model-a, yes), c2 (model-b, partial); c6's judge error is in no denominator
    assert rows[(sup, "web", "2026-11-02", "model-a")] == (1.0, 1, 1.0)
    assert rows[(sup, "web", "2026-11-02", "model-b")] == (0.0, 1, 0.0)
    # legal: l2 (model-b) said yes but a number is missing
    assert rows[(sup, "legal", "2026-11-02", "model-a")] == (1.0, 1, 1.0)
    assert rows[(sup, "legal", "2026-11-02", "model-b")] == (0.0, 1, 0.0)
    assert not any(k[0] == sup and k[1] == "search" for k in rows)  # nothing judged: no row, not a 0
    assert len(rows) == 7 + 6


def test_answer_model_breakdowns_sum_to_their_headline_rate(metrics_con):
    for breakdown, headline in (
        ("provenance_pass_rate_by_answer_model", "provenance_pass_rate"),
        ("support_pass_rate_by_answer_model", "support_pass_rate"),
    ):
        summed = metrics_con.sql(
            "select week_start, surface, sum(numerator), sum(denominator) from weekly_breakdowns "
            "where metric = $m group by all",
            params={"m": breakdown},
        ).fetchall()
        whole = metrics_con.sql(
            "select week_start, surface, numerator, denominator from weekly_surface_metrics "
            "where metric = $m and denominator > 0",
            params={"m": headline},
        ).fetchall()
        assert sorted(summed) == sorted(whole), breakdown


def test_every_week_and_surface_has_a_row_of_every_rate(metrics_con):
    [(n,)] = metrics_con.sql("select count(*) from weekly_surface_metrics").fetchall()
    assert n == 4 * 5  # (web, legal, search) in W1 + web in W2, five rates each (support_unjudged_rate the fifth)
    assert metrics_con.sql("select distinct week_start from weekly_surface_metrics order by 1").fetchall() == [
        (W1,),
        (W2,),
    ]


def test_checks_pass_on_consistent_tables_and_warn_on_pass_up_repair_down(metrics_con):
    assert query(metrics_con, "metric_tables/check_bounds").fetchall() == []
    assert query(metrics_con, "metric_tables/check_reconcile").fetchall() == []
    assert query(metrics_con, "metric_tables/check_versions").fetchall() == []
    # web: end-to-end 0.333 → 0.5 while repairs 0.333 → 0: the seed's warning
    [(surface, week, *_)] = query(metrics_con, "metric_tables/check_pass_up_repair_down").fetchall()
    assert (surface, week) == ("web", W2)


def test_reconcile_and_bounds_fail_when_they_should(metrics_con):
    metrics_con.execute(
        "insert into support_verdicts values "
        "('c3', 'r-c3', '2026-11-03', 'web', 'no', true, 'judge-j', false, 'model-a')"
    )
    unreconciled = query(metrics_con, "metric_tables/check_reconcile").fetchall()
    assert sorted((surface, metric, got, expected) for _week, surface, metric, got, expected in unreconciled) == [
        ("web", "support_pass_rate", 2, 3),
        ("web", "support_unjudged_rate", 3, 4),  # every selected citation: judge errors too
    ]
    metrics_con.execute(
        "update weekly_surface_metrics set numerator = 9 where metric = 'provenance_pass_rate' and surface = 'legal'"
    )
    assert len(query(metrics_con, "metric_tables/check_bounds").fetchall()) == 1
    metrics_con.execute(
        "update weekly_surface_metrics set definition_version = definition_version + 1 "
        "where metric = 'support_pass_rate' and surface = 'web' and week_start = '2026-11-02'"
    )
    assert query(metrics_con, "metric_tables/check_versions").fetchall()[0][1] == "support_pass_rate"


def test_trace_returns_exactly_the_rows_counted(metrics_con):
    for metric, surface, week, numerator, denominator in metrics_con.sql(
        "select metric, surface, week_start, numerator, denominator from weekly_surface_metrics"
    ).fetchall():
        params = {"metric": metric, "surface": surface, "week": week, "breakdown": None}
        [(rows, weight, _, prompts)] = query(metrics_con, "metric_tables/trace_totals", params).fetchall()
        assert rows == denominator
        assert (weight or 0) == pytest.approx(numerator or 0)
        listed = query(metrics_con, "metric_tables/trace_rows", params).fetchall()
        assert len(listed) == denominator and all(r[3] for r in listed)  # each with its prompt's sha256


def test_definition_headers_and_lock(tmp_path):
    definitions = load_definitions()
    assert {d.name for d in definitions} >= {
        "provenance_pass_rate",
        "support_pass_rate",
        "end_to_end_pass_rate",
        "queue_repair_rate",
        "provenance_pass_rate_by_answer_model",
        "support_pass_rate_by_answer_model",
    }
    by_name = {d.name: d for d in definitions}
    for name in ("provenance_pass_rate_by_answer_model", "support_pass_rate_by_answer_model"):
        assert by_name[name].kind == "breakdown" and by_name[name].version == 1
    assert lock_problems(definitions, read_lock()) == []  # the shipped definitions are preregistered
    folder = tmp_path / "metrics"
    folder.mkdir()
    source = next(d for d in definitions if d.name == "support_pass_rate")
    text = open(source.path).read()
    (folder / "support_pass_rate.sql").write_text(text)
    lock_path = tmp_path / "lock.json"
    now, bumped = f"support_pass_rate v{source.version}", f"support_pass_rate v{source.version + 1}"
    assert update_lock(load_definitions(folder), lock_path) == [now]
    (folder / "support_pass_rate.sql").write_text(text.replace("'partial', 'no', 'unparseable'", "'partial', 'no'"))
    [problem] = lock_problems(load_definitions(folder), read_lock(lock_path))
    assert problem.startswith(f"{now}: definition text changed without a version bump")
    with pytest.raises(DefinitionError, match=now):
        update_lock(load_definitions(folder), lock_path)
    (folder / "support_pass_rate.sql").write_text(
        text.replace("'partial', 'no', 'unparseable'", "'partial', 'no'").replace(
            f"-- version: {source.version}", f"-- version: {source.version + 1}"
        )
    )
    assert update_lock(load_definitions(folder), lock_path) == [bumped]
    assert lock_problems(load_definitions(folder), read_lock(lock_path)) == []


def test_header_errors_name_the_file(tmp_path):
    bad = tmp_path / "x.sql"
    bad.write_text("-- name: x\n-- version: 1\n-- kind: rate\nselect 1")
    with pytest.raises(DefinitionError, match="x.sql: header is missing 'description'"):
        parse_definition(bad)
