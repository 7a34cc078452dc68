"""A trace-export line holds many calls (the collector writes one export request of many traces per line): a
rejected call's reject row keeps only its own spans and records, never another call's text, in the working
warehouse and in the published copy; and `citegate forget` of a call names every landing line its record was read
from (its own span's line, the line of its events), so that after it no table holds the call's text."""

from __future__ import annotations

import json
from datetime import date

from citegate_assets.cli import main
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .test_forget import holding
from .trace_files import attribute, chat_span, merged, otlp_lines, question, request_id

DAY = date(2026, 11, 16)


def _reject_rows(path) -> dict[str, tuple[str, int, str]]:
    with connect(path, read_only=True) as con:
        rows = con.sql("select request_id, source_file, line_no, raw_line from ingest_rejects").fetchall()
    return {rid: (source, line, raw) for rid, source, line, raw in rows if rid is not None}


def test_a_rejected_calls_row_holds_only_its_own_part_and_forget_names_every_line(
    tmp_path, dagster_home, monkeypatch, capsys
):
    attrs, events = otlp_lines("otlp_attributes.jsonl"), otlp_lines("otlp_events.jsonl")
    # one export request of four traces: two calls that land, one redacted and one whose content was not captured
    together = [attrs[0], attrs[5], attrs[2], attrs[8]]
    # the older events: both calls' spans on line 1, both calls' events on line 2; the second call is rejected
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "traces.jsonl").write_text(json.dumps(merged(*together)) + "\n")
    (landing / "events.jsonl").write_text(
        json.dumps(merged(events[0], events[2])) + "\n" + json.dumps(merged(events[1], events[3])) + "\n"
    )
    config = tmp_path / "citegate.toml"
    config.write_text("[ingest]\nsettle_seconds = 0\n")  # trace files are converted once settled
    warehouse = tmp_path / "w.duckdb"
    published = warehouse.with_name("w.published.duckdb")
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    monkeypatch.delenv("CITEGATE_LAKE", raising=False)
    monkeypatch.delenv("CITEGATE_PUBLISHED", raising=False)
    assert run_range(RunPlan(DAY, DAY), landing=landing, warehouse=warehouse, config_file=config).success

    calls = {request_id(r): r for r in together}
    landed, redacted, not_captured = request_id(attrs[0]), request_id(attrs[5]), request_id(attrs[8])
    event_landed, event_rejected = request_id(events[0]), request_id(events[2])
    for path in (warehouse, published):
        rows = _reject_rows(path)
        assert set(rows) == {redacted, not_captured, event_rejected}
        for rid in (redacted, not_captured):
            source, line, raw = rows[rid]
            assert (source, line) == ("traces.jsonl", 1)
            part = json.loads(raw)  # the call's own span, as one JSON object, with its line
            assert part["line"] == 1 and part["span"]["spanId"] == chat_span(calls[rid])["spanId"]
            for other, request in calls.items():
                if other != rid:  # no other call's question or response id is in the row
                    assert question(request) not in raw, (rid, other)
                    assert chat_span(request)["spanId"] not in raw, (rid, other)
        source, line, raw = rows[event_rejected]
        assert (source, line) == ("events.jsonl", 1)
        part = json.loads(raw)
        assert part["span"]["spanId"] == chat_span(events[2])["spanId"]
        assert [e["line"] for e in part["events"]] == [2, 2, 2]  # its own events only (roles, no content)
        assert question(events[0]) not in raw and chat_span(events[0])["spanId"] not in raw

    # the events file's first call landed: its messages were read from line 2, which holds the other call's too
    paths = ["--warehouse", str(warehouse), "--config", str(config), "--published", str(published)]
    capsys.readouterr()
    assert main(["forget", "--request-id", event_landed, landed, "--by", "dpo"] + paths) == 0
    out = capsys.readouterr().out
    assert f"events.jsonl line 1 (prompt of {event_landed})" in out
    assert f"events.jsonl line 2 (trace span or event of {event_landed})" in out
    assert f"traces.jsonl line 1 (prompt of {landed})" in out
    for path in (warehouse, published):
        with connect(path, read_only=True) as con:
            for gone in (question(events[0]), question(attrs[0])):
                assert holding(con, gone) == [], (path.name, gone)
            # the rejected calls keep their own part: forgetting one call takes nothing of another
            own = attribute(chat_span(attrs[5]), "gen_ai.response.id")
            assert holding(con, own) == ["ingest_rejects.raw_line"]


def test_a_line_of_several_calls_given_without_parts_is_not_kept_for_any_of_them(tmp_path, config):
    """An adapter that gives no part (a format of one call per line would not need one): the line is kept only when
    no other call is on it."""
    from citegate_assets.lib.ingest import adapters
    from citegate_assets.lib.ingest.adapters import Call
    from citegate_assets.lib.ingest.stream import ingest_landing

    class TwoPerLine:
        name = "twoperline"

        def detect(self, first_line: bytes) -> bool:
            return first_line.startswith(b'{"two"')

        def convert(self, lines, settings):
            for no, raw in lines:
                for rid in json.loads(raw)["two"]:
                    yield Call(no, rid, None, "content_redacted", f"{rid} was redacted")

    adapters.register(TwoPerLine())
    try:
        landing = tmp_path / "landing"
        landing.mkdir()
        (landing / "t.jsonl").write_text('{"two": ["a-secret", "b-secret"]}\n{"two": ["c-secret"]}\n')
        with connect(tmp_path / "w.duckdb") as con:
            from citegate_assets.lib.storage.warehouse import ensure_schema

            ensure_schema(con)
            ingest_landing(con, landing, config, final=True)
            rows = con.sql("select request_id, line_no, raw_line from ingest_rejects order by request_id").fetchall()
    finally:
        adapters.unregister("twoperline")
    assert [(rid, line) for rid, line, _ in rows] == [("a-secret", 1), ("b-secret", 1), ("c-secret", 2)]
    assert "secret" not in rows[0][2] and "secret" not in rows[1][2]
    assert json.loads(rows[0][2]) == {"line": 1, "not_kept": "the line holds 2 calls; it is not kept for one of them"}
    assert rows[2][2] == '{"two": ["c-secret"]}'
