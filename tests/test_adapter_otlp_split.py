"""OTLP spans and log records in files of their own (the OpenTelemetry file-exporter layout), recorded by the real
SDK and opentelemetry-instrumentation-openai-v2 (scripts/record_otlp_fixtures.py, the `otlp_split_*` files): a
call's message events are joined to its span by trace and span id across the landing folder's files, a spans file
waits while a logs file that may still bring its events is being written, every logs line is accounted, and the
surface comes from the request's root span."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections import Counter
from datetime import date, datetime, timezone
from pathlib import Path

from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

FIXTURES = Path(__file__).parent / "fixtures" / "adapters" / "otlp"
SPANS = ("otlp_split_events_spans.jsonl", "otlp_split_details_spans.jsonl")
LOGS = {name: name.replace("_spans.jsonl", "_logs.jsonl") for name in SPANS}
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)
SURFACE = "help-center-web"  # on each request's root span, as `app.surface`; the resource says help-center-split


def _expected() -> list[dict]:
    rows = [json.loads(x) for x in (FIXTURES / "expected.jsonl").read_text(encoding="utf-8").splitlines()]
    return [e for e in rows if e["file"] in SPANS]


def _landing(tmp_path: Path) -> Path:
    landing = tmp_path / "landing"
    landing.mkdir()
    for name in SPANS:
        shutil.copy(FIXTURES / name, landing / name)
        shutil.copy(FIXTURES / LOGS[name], landing / LOGS[name])
    return landing


def _config(**ingest: object):
    return parse_config({"adapters": {"surface_key": "app.surface"}, "ingest": ingest}, None)


def test_events_in_a_logs_file_of_their_own_are_joined_and_every_planted_reason_holds(tmp_path):
    landing = _landing(tmp_path)
    expected = _expected()
    assert len([e for e in expected if e["position"] is not None]) >= 10
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        summary = ingest_landing(con, landing, _config(), final=True, now=NOW)
        assert summary.trace_files == 4
        assert con.sql("select reason, detail from ingest_rejects").fetchall() == []
        check_provenance(con, date(2026, 11, 1), date(2026, 11, 30), now=NOW)
        got = dict(con.sql("select citation_id, reason from provenance_results").fetchall())
        want = {
            f"{e['request_id']}#{e['position']}": e["expected_reason"] for e in expected if e["position"] is not None
        }
        assert got == want
        # the prompt was rebuilt from the logs file's events: the system message with the sources, the question
        prompts = con.sql("select request_id, surface, prompt_raw from prompts").fetchall()
        assert {rid for rid, _, _ in prompts} == {e["request_id"] for e in expected}
        assert {surface for _, surface, _ in prompts} == {SURFACE}
        for _, _, prompt in prompts:
            roles = [m["role"] for m in json.loads(prompt)["messages"]]
            assert roles == ["system", "user"]
        # forget and retention name the logs file's lines the records were read from
        read_from = con.sql("select distinct source_file from request_source_lines").fetchall()
        assert {f for (f,) in read_from} == set(LOGS.values())
        # each logs file's lines are accounted: events of calls in its spans file, none left unexplained
        ledger = dict(con.sql("select file_name, detail from ingested_files").fetchall())
        for spans, logs in LOGS.items():
            lines = len((FIXTURES / logs).read_bytes().splitlines())
            assert (
                f"({0} hold calls, {lines} hold events of calls in {spans}, 0 hold no call, 0 rejected)"
                in (ledger[logs])
            ), ledger[logs]


def test_a_spans_file_waits_while_its_logs_file_may_still_bring_events(tmp_path):
    landing = _landing(tmp_path)
    settle = 20 * 365 * 24 * 3600  # the recorded calls ended in 2026-11: a logs file written since may still grow
    now = time.time()
    for name in (*SPANS, *LOGS.values()):
        os.utime(landing / name, (now - 2 * settle, now - 2 * settle))  # settled
    for name in LOGS.values():  # still being written: the batch holding the last call's events not yet in it
        whole = (FIXTURES / name).read_bytes().splitlines(keepends=True)
        assert len(whole) >= 2
        (landing / name).write_bytes(b"".join(whole[:-1]))
        os.utime(landing / name, (now - settle / 2, now - settle / 2))
    config = _config(settle_seconds=settle)
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        ingest_landing(con, landing, config, now=NOW)
        assert con.sql("select count(*) from prompts").fetchall() == [(0,)]
        assert con.sql("select count(*) from ingest_rejects").fetchall() == [(0,)]
        held = dict(con.sql("select file_name, status from ingested_files").fetchall())
        assert {held[name] for name in SPANS} == {"waiting"}
        detail = con.execute("select detail from ingested_files where file_name = $1", [SPANS[0]]).fetchall()[0][0]
        assert any(name in detail for name in LOGS.values()) and "still being written" in detail
        for name in LOGS.values():  # the logs files are written to their end and settle: the calls get their events
            shutil.copy(FIXTURES / name, landing / name)
            os.utime(landing / name, (now - 2 * settle, now - 2 * settle))
        ingest_landing(con, landing, config, now=NOW)
        assert con.sql("select count(*) from ingest_rejects").fetchall() == [(0,)]
        calls = {e["request_id"] for e in _expected()}
        assert {rid for (rid,) in con.sql("select request_id from prompts").fetchall()} == calls


def test_without_its_logs_file_each_call_is_content_not_captured(tmp_path):
    """The spans file alone: nothing to join, nothing to wait for; each call says what is missing."""
    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(FIXTURES / SPANS[0], landing / SPANS[0])
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        ingest_landing(con, landing, _config(), final=True, now=NOW)
        reasons = Counter(r for (r,) in con.sql("select reason from ingest_rejects").fetchall())
        assert reasons == {"content_not_captured": len({e["request_id"] for e in _expected() if e["file"] == SPANS[0]})}
