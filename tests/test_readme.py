"""The README is the door: under 250 lines, the two commands with what `make test` runs, one complete log line that
the real ingest code lands with no reject (and whose citation passes the provenance gate), the doctor -> run ->
queue -> serve path, a real judge, and links that lead to pages that exist."""

from __future__ import annotations

import json
import re
import tomllib
from datetime import date, datetime, timezone
from pathlib import Path

from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

PROJECT = Path(__file__).resolve().parents[1]
README = PROJECT / "README.md"
NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)


def readme() -> str:
    return README.read_text(encoding="utf-8")


def section(title: str) -> str:
    return readme().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def example_line() -> str:
    [line] = re.findall(r"```json\n(.*?)\n```", section("Your own logs in five minutes"), re.DOTALL)
    return line


def test_the_readme_is_short():
    assert len(readme().splitlines()) <= 250


def test_the_example_log_line_lands_with_no_reject_and_its_citation_passes_provenance(tmp_path):
    line = example_line()
    assert "\n" not in line  # one complete line, as it goes into a landing file
    record = json.loads(line)
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "app.jsonl").write_text(line + "\n", encoding="utf-8")
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        summary = ingest_landing(con, landing, parse_config({}, None), final=True, now=NOW)
        assert (summary.records_ingested, summary.records_rejected, summary.answers_rejected) == (1, 0, 0)
        assert con.sql("select count(*) from ingest_rejects").fetchall() == [(0,)]
        assert con.sql("select count(*) from answer_rejects").fetchall() == [(0,)]
        assert con.sql("select request_id, surface, profile_status from prompts").fetchall() == [
            (record["request_id"], record["surface"], "ok")
        ]
        check_provenance(con, date(2026, 11, 1), date(2026, 11, 30))
        assert con.sql("select citation_id, reason from provenance_results").fetchall() == [
            (f"{record['request_id']}#0", "ok")
        ]


def test_the_two_commands_say_what_make_test_runs_and_how_long_it_took():
    two = section("Two commands")
    assert "make demo" in two and "make test" in two
    assert "ruff" in two and "mypy" in two
    assert re.search(r"`make test` took \d+ min \d+ s", two)


def test_the_path_to_your_own_logs_goes_doctor_run_queue_serve():
    steps = section("Your own logs in five minutes")
    positions = [steps.index(f"citegate {command}") for command in ("doctor", "run", "queue", "serve")]
    assert positions == sorted(positions)


def test_the_judge_block_is_a_valid_config_and_the_full_page_is_linked():
    judge = section("Connect a real judge")
    [block] = re.findall(r"```toml\n(.*?)```", judge, re.DOTALL)
    assert parse_config(tomllib.loads(block), "README.md").judge.mode == "cascade"
    assert "(docs/judges.md)" in judge


def test_every_link_of_the_readme_leads_to_a_file_and_the_command_reference_is_linked():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme())
    assert "docs/cli.md" in links and any(link.endswith(".png") for link in links)
    missing = [link for link in links if not link.startswith("http") and not (PROJECT / link).exists()]
    assert not missing
