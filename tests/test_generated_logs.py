"""Generated logs through the whole nightly job: every citation gets exactly the reason the generator
planted, and every malformed line lands in its reject table with the expected reason."""

import json
from datetime import date

import pytest

from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import plan_days, run_range

# the generator's names for what it broke → the reject reason citegate records
EXPECTED_REJECT = {
    "invalid_json": ("ingest_rejects", "invalid_json"),
    "missing_field": ("ingest_rejects", "missing_field"),
    "wrong_type": ("ingest_rejects", "wrong_type"),
    "citations_unparseable": ("answer_rejects", "citations_not_json"),
    "citation_empty_span": ("answer_rejects", "citation_empty_field"),
    "duplicate_same": ("ingest_rejects", "duplicate_request_id"),
    "duplicate_conflict": ("ingest_rejects", "request_id_conflict"),
    "timestamp_no_timezone": ("ingest_rejects", "timestamp_without_timezone"),
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("generated")
    summary = generate_logs(root / "landing", days=4, requests_per_day=150, seed=11, truth_path=root / "truth.jsonl")
    truth = [json.loads(line) for line in (root / "truth.jsonl").read_text().splitlines()]
    return root, summary, truth


@pytest.fixture
def warehouse_after_run(generated, dagster_home):
    root, _, _ = generated
    warehouse = root / "warehouse.duckdb"
    if not warehouse.exists():
        plan = plan_days(root / "landing", warehouse, None, None, today=date(2026, 11, 30))
        assert run_range(plan, landing=root / "landing", warehouse=warehouse, config_file=None).success
    return warehouse


def test_every_citation_gets_its_planted_reason(generated, warehouse_after_run):
    _, summary, truth = generated
    expected = {t["citation_id"]: t["expected_reason"] for t in truth if "citation_id" in t}
    with connect(warehouse_after_run, read_only=True) as con:
        got = dict(con.sql("select citation_id, reason from provenance_results").fetchall())
    assert len(expected) == summary["citations"]
    assert got == expected
    assert set(expected.values()) == {
        "ok",
        "fabricated_id",
        "dropped_before_prompt",
        "span_truncated",
        "span_missing",
        "span_outside_context",
        "span_in_other_chunk",
    }


def test_every_malformed_line_is_rejected_with_its_reason(generated, warehouse_after_run):
    _, summary, truth = generated
    planted = [t for t in truth if "expected_reject" in t]
    assert len(planted) == summary["malformed_lines"] > 0
    with connect(warehouse_after_run, read_only=True) as con:
        ingest = {
            (f, n): r for f, n, r in con.sql("select source_file, line_no, reason from ingest_rejects").fetchall()
        }
        answers = {
            (f, n): r for f, n, r in con.sql("select source_file, source_line, reason from answer_rejects").fetchall()
        }
        [(read, ingested, rejected)] = con.sql(
            "select sum(lines_read), sum(records_ingested), sum(records_rejected) from ingested_files"
        ).fetchall()
    tables = {"ingest_rejects": ingest, "answer_rejects": answers}
    for t in planted:
        table, reason = EXPECTED_REJECT[t["expected_reject"]]
        assert tables[table].get((t["file"], t["line"])) == reason, t
    assert len(ingest) + len(answers) == len(planted)  # no good line was rejected
    assert read == ingested + rejected == summary["records"] + len(planted)
    assert ingested == summary["records"] + len(answers)  # an answer reject still stores its prompt
