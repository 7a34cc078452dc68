"""Rejects you can read: `citegate rejects` lists file:line, reason and detail from the published copy (escaped),
`citegate doctor` lists the lines that would be rejected and exits 1, and the run summary names the command."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from citegate_assets.cli import main
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.report_view import summarize
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

OTLP = Path(__file__).parent / "fixtures" / "adapters" / "otlp"
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)
GOOD = {
    "request_id": "r-ok",
    "logged_at": "2026-11-16T09:00:00Z",
    "surface": "help",
    "answer_model": "m",
    "prompt": "Sources:\n[kb-1] Refunds take 5 days.\n\nQuestion: how long?",
    "prompt_encoding": "text",
    "retrieved": [{"chunk_id": "kb-1", "text": "Refunds take 5 days."}],
    "answer": "5 days.",
    "citations": [{"chunk_id": "kb-1", "span": "Refunds take 5 days.", "claim": "5 days."}],
}


def _landing(tmp_path: Path, bad: int = 2) -> Path:
    landing = tmp_path / "landing"
    landing.mkdir()
    lines = [json.dumps(GOOD)]
    for i in range(bad):
        lines.append(json.dumps({k: v for k, v in {**GOOD, "request_id": f"r-bad-{i}"}.items() if k != "answer_model"}))
    (landing / "app.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return landing


def _warehouse(tmp_path: Path, landing: Path) -> Path:
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        ingest_landing(con, landing, parse_config({}, None), final=True, now=NOW)
    return path


def test_rejects_lists_file_line_reason_and_detail_by_file_and_line(tmp_path, capsys):
    landing = _landing(tmp_path)
    shutil.copy(OTLP / "otlp_attributes.jsonl", landing / "otlp_attributes.jsonl")
    published = _warehouse(tmp_path, landing)
    assert main(["rejects", "--published", str(published)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "7 rejected lines (by file and line):"
    assert out[1:3] == [
        "app.jsonl:2  missing_field  required field 'answer_model' is missing or null",
        "app.jsonl:3  missing_field  required field 'answer_model' is missing or null",
    ]
    otlp = [line for line in out if line.startswith("otlp_attributes.jsonl:")]
    assert [line.split("  ")[1] for line in otlp] == [
        "content_redacted",
        "content_not_captured",
        "content_truncated",
        "invalid_json",
        "not_of_format",
    ]
    assert int(otlp[-1].split("  ")[0].split(":")[1]) == 12  # by line, the last line last
    assert main(["rejects", "--published", str(published), "--reason", "missing_field", "--limit", "1"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "2 rejected lines with reason 'missing_field' (by file and line):",
        "app.jsonl:2  missing_field  required field 'answer_model' is missing or null",
        "1 more: citegate rejects --limit 2",
    ]
    assert main(["rejects", "--published", str(published), "--file", "nothing.jsonl"]) == 0
    assert capsys.readouterr().out.splitlines() == ["no rejected lines with file 'nothing.jsonl'"]


def test_rejects_escapes_a_hostile_file_name_and_detail(tmp_path, capsys):
    published = _warehouse(tmp_path, _landing(tmp_path, bad=0))
    with connect(published) as con:
        con.execute(
            "insert into ingest_rejects (source_file, line_no, reason, detail, rejected_at) values ($1, 4, $2, $3, $4)",
            ["x\x1b]8;;http://evil\x07.jsonl", "invalid_json", "bad\x1b[2J\r\u202eline\nfake row", NOW],
        )
    assert main(["rejects", "--published", str(published)]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert out.splitlines()[1] == (
        "x\\x1b]8;;http://evil\\x07.jsonl:4  invalid_json  bad\\x1b[2J\\r\\u202eline\\nfake row"
    )


def test_rejects_exits_0_on_a_warehouse_without_rejects(tmp_path, capsys):
    published = _warehouse(tmp_path, _landing(tmp_path, bad=0))
    assert main(["rejects", "--published", str(published)]) == 0
    assert capsys.readouterr().out.splitlines() == ["no rejected lines"]


def test_the_run_summary_names_the_command_when_there_are_rejects(tmp_path):
    with_rejects = summarize(_warehouse(tmp_path, _landing(tmp_path)))
    assert "  2 rejected: `citegate rejects` lists each (file:line, reason, detail)" in with_rejects.splitlines()
    clean = tmp_path / "clean"
    clean.mkdir()
    assert "citegate rejects" not in summarize(_warehouse(clean, _landing(clean, bad=0)))


def test_doctor_lists_the_lines_that_would_be_rejected_and_exits_1(tmp_path, capsys):
    landing = _landing(tmp_path, bad=7)
    assert main(["doctor", "--logs", str(landing)]) == 1
    out = capsys.readouterr().out.splitlines()
    at = out.index("  7 lines would be rejected:")
    assert out[at + 1 : at + 7] == [
        *(f"    app.jsonl:{n}  missing_field  required field 'answer_model' is missing or null" for n in range(2, 7)),
        "    2 more: citegate rejects (after `citegate run`)",
    ]
    clean = tmp_path / "clean"
    clean.mkdir()
    assert main(["doctor", "--logs", str(_landing(clean, bad=0))]) == 0
    assert "would be rejected" not in capsys.readouterr().out


def test_doctor_joins_a_logs_file_of_its_own_as_ingest_does(tmp_path, capsys):
    """The OTel split layout: doctor reads the calls with their events, so it finds nothing to reject."""
    landing = tmp_path / "landing"
    landing.mkdir()
    for name in ("otlp_split_events_spans.jsonl", "otlp_split_events_logs.jsonl"):
        shutil.copy(OTLP / name, landing / name)
    main(["doctor", "--logs", str(landing)])
    out = capsys.readouterr().out
    assert "would be rejected" not in out and "content_not_captured" not in out
    assert "2 hold events of calls in otlp_split_events_spans.jsonl" in out
