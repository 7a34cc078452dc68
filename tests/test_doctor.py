"""`citegate doctor`: the landing folder's records through the ingest's build_frames, counted per
(surface, template) with a verdict; no warehouse. The counting is plain functions over polars frames."""

from __future__ import annotations

import json
import shutil
import unicodedata
from datetime import datetime, timezone
from pathlib import Path

import pytest

from citegate_assets.cli import main
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.core.terminal import ESCAPED_CATEGORIES
from citegate_assets.lib.ingest.batch import frames_of_records
from citegate_assets.lib.ingest.doctor import chunk_fits, doctor, read_landing
from citegate_assets.lib.ingest.records import parse_line

from .helpers import scenario_record, write_jsonl

FRAMEWORKS = Path(__file__).parent / "fixtures" / "frameworks"
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)


@pytest.fixture
def frameworks(landing):
    for path in FRAMEWORKS.glob("*.jsonl"):
        if path.name != "truth.jsonl":
            shutil.copy(path, landing / path.name)
    return landing


def by_surface(report) -> dict:
    return {f.surface: f for f in report.fits}


# ------------------------------------------------------------------------------- real framework prompts


def test_every_framework_surface_fits_under_auto_with_no_config(frameworks):
    report = doctor(frameworks, parse_config({}, None), now=NOW)
    fits = by_surface(report)
    assert len(fits) == 11 and report.ok
    for f in fits.values():
        assert f.template == "auto" and f.verdict() == "fits", (f.surface, f.verdict())
        assert f.records == 4 and f.chunks == 20 and f.missing == f.at_end == 4  # rank 5 is dropped by the app
        assert f.whole + f.cut + f.pieces == 16 and f.altered == f.unresolved == f.no_block == 0


def test_a_wrong_profile_does_not_fit_and_a_fitting_one_is_suggested(frameworks):
    config = parse_config(
        {
            "surfaces": {
                "langchain_stuff_chat": {"template": "anthropic-xml"},
                "langchain_stuff_mustache": {"template": "langchain-stuff"},
            }
        },
        None,
    )
    report = doctor(frameworks, config, now=NOW)
    fits = by_surface(report)
    assert not report.ok
    chat = fits["langchain_stuff_chat"]
    assert chat.template == "anthropic-xml" and chat.no_block == 4
    assert chat.verdict().startswith("does not fit: no context block in 4 of 4 prompts — try template auto (fits")
    best, fitting = chat.suggestion()
    assert best == "auto" and {"auto", "langchain-stuff", "langchain-stuff-mustache"} <= set(fitting)
    assert chat.alternatives["auto"].fits and not chat.alternatives["plain-list"].fits
    assert "no_block" in chat.examples and chat.examples["no_block"].source == "langchain_stuff_chat.jsonl"
    # a profile that finds every chunk but does not unescape what mustache escaped: the text differs
    mustache = fits["langchain_stuff_mustache"]
    assert mustache.altered > 0 and not mustache.fits
    assert "differ from their text in the prompt" in mustache.verdict()
    assert "langchain-stuff-mustache" in mustache.suggestion()[1]
    assert all(f.fits for s, f in fits.items() if s not in ("langchain_stuff_chat", "langchain_stuff_mustache"))


# ------------------------------------------------------------------------------- exact counts


def _frames(records: list[dict]):
    recs = [parse_line(json.dumps(r), NOW) for r in records]
    frames, refused = frames_of_records(
        list(enumerate(recs)), parse_config({}, None), {i: ("a.jsonl", i + 1) for i in range(len(recs))}, NOW
    )
    assert not refused
    return frames


@pytest.mark.parametrize(
    "template,encoding",
    [
        ("plain-list", "text"),
        ("anthropic-xml", "json"),
        ("llamaindex-citation", "python_repr"),
        ("langchain-stuff-mustache", "json"),
    ],
)
@pytest.mark.parametrize("auto", [False, True], ids=["named", "auto"])
def test_whole_cut_missing_per_retrieved_chunk(template, encoding, auto):
    rec = scenario_record(template, encoding)
    if auto:
        rec["template"] = None
    found = {
        cid: (how, end)
        for cid, how, end in chunk_fits(_frames([rec])).select("chunk_id", "found", "at_end").iter_rows()
    }
    assert found == {
        "kb-1#c1": ("whole", False),
        "kb-2#c1": ("whole", False),
        "kb-3#c2": ("cut", False),
        "kb-4#c1": ("missing", True),
    }


def test_counts_on_a_hand_written_landing_file(landing):
    write_jsonl(
        landing / "app.jsonl",
        [scenario_record("plain-list", "text", "r1"), scenario_record("anthropic-xml", "json", "r2")],
    )
    report = doctor(landing, parse_config({}, None), now=NOW)
    assert report.ok and report.reading.records == 2
    assert [f.template for f in report.fits] == ["anthropic-xml", "plain-list"]
    for f in report.fits:
        assert (f.records, f.chunks, f.whole, f.cut, f.pieces, f.missing, f.at_end) == (1, 4, 2, 1, 0, 1, 1)
        assert (f.altered, f.unresolved, f.no_block, f.unknown) == (0, 0, 0, 0) and f.verdict() == "fits"


def test_a_chunk_missing_from_the_middle_does_not_fit(landing):
    rec = scenario_record("plain-list", "text")
    rec["retrieved"].insert(0, rec["retrieved"].pop())  # kb-4#c1, never rendered, now ranks first
    write_jsonl(landing / "app.jsonl", [rec])
    [f] = doctor(landing, parse_config({}, None), now=NOW).fits
    assert (f.whole, f.cut, f.missing, f.at_end, f.unexplained) == (2, 1, 1, 0, 1)
    assert f.verdict() == (
        "does not fit: 25% of retrieved chunks not found (1 of 4) — if assembly drops them that is real; "
        "no built-in finds more of them"
    )
    assert "kb-4#c1" in f.examples["missing"].detail and f.examples["missing"].line == 1


def test_unknown_template_and_reading_like_run_final(landing):
    a = scenario_record("plain-list", "text", "r1")
    b = {**scenario_record("plain-list", "text", "r2"), "template": "no-such"}
    (landing / "app.jsonl").write_text(
        "\n".join([json.dumps(a), "{not json", json.dumps(a), json.dumps(b)])
    )  # no final newline
    reading = read_landing(landing, parse_config({}, None), now=NOW)
    assert reading.records == 2 and reading.duplicates == 1 and dict(reading.rejected) == {"invalid_json": 1}
    report = doctor(landing, parse_config({}, None), now=NOW)
    unknown = next(f for f in report.fits if f.template == "no-such")
    assert unknown.unknown == 1 and unknown.examples["unknown"].line == 4
    assert unknown.verdict().startswith("does not fit: no template named no-such in 1 of 1 prompts")
    assert "try template auto (fits; so do plain-list)" in unknown.verdict()
    assert read_landing(landing, parse_config({}, None), limit=1, now=NOW).over_limit == 1


# ------------------------------------------------------------------------------- the command


@pytest.fixture
def no_ambient_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CITEGATE_CONFIG", raising=False)
    monkeypatch.delenv("CITEGATE_LOGS", raising=False)


def test_cli_exit_code_says_whether_everything_fits(frameworks, tmp_path, capsys, no_ambient_config):
    assert main(["doctor", "--logs", str(frameworks)]) == 0
    assert "every template fits" in capsys.readouterr().out
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[surfaces.langchain_stuff_chat]\ntemplate = "anthropic-xml"\n')
    assert main(["doctor", "--logs", str(frameworks), "--config", str(wrong)]) == 1
    out = capsys.readouterr().out
    assert (
        "langchain_stuff_chat / anthropic-xml: does not fit: no context block in 4 of 4 prompts — try template auto"
        in out
    )
    assert "e.g. no context block: fx-langchain_stuff_chat-q1 at langchain_stuff_chat.jsonl:1" in out


def test_cli_prints_no_control_characters_from_logs(landing, capsys, no_ambient_config):
    evil = "\x1b[2J\r[fits]\u202e"
    rec = {**scenario_record("plain-list", "text", "req\x1b[2J"), "surface": "\x1b[2J", "template": "anthropic-xml"}
    rec["prompt"] = evil + rec["prompt"]
    write_jsonl(landing / "app.jsonl", [rec])
    assert main(["doctor", "--logs", str(landing)]) == 1
    out = capsys.readouterr().out
    assert not [ch for ch in out if unicodedata.category(ch) in ESCAPED_CATEGORIES and ch != "\n"]
    assert (
        "\\x1b[2J / anthropic-xml: does not fit" in out
        and "req\\x1b[2J" in out
        and "      \\x1b[2J [fits]\\u202e" in out
    )


# ------------------------------------------------------------------------------- trace-format files

ADAPTER_FIXTURES = Path(__file__).parent / "fixtures" / "adapters"


@pytest.fixture
def traces(landing):
    """Two committed trace fixtures as they were exported (one span per line; a pretty-printed API page), a
    citegate-log/1 file, and a *.json file of no trace format."""
    shutil.copy(ADAPTER_FIXTURES / "openinference" / "phoenix_spans.jsonl", landing / "phoenix_spans.jsonl")
    shutil.copy(ADAPTER_FIXTURES / "langfuse" / "observations_page.json", landing / "observations_page.json")
    shutil.copy(FRAMEWORKS / "anthropic_xml.jsonl", landing / "anthropic_xml.jsonl")
    (landing / "other.json").write_text('{\n  "not": "a trace"\n}\n', encoding="utf-8")
    return landing


def test_trace_files_are_converted_first_and_their_records_examined(traces):
    config = parse_config({}, None)
    reading = read_landing(traces, config, now=NOW)
    assert reading.formats == {
        "anthropic_xml.jsonl": "citegate-log/1",
        "observations_page.json": "langfuse",
        "other.json": "not read (unknown_trace_format)",
        "phoenix_spans.jsonl": "openinference",
    }
    sources: dict = {}
    for group in reading.groups.values():
        for (source, _), rec in group:
            sources.setdefault(source, set()).add(rec.request_id)
    # the calls each adapter converted, and nothing of the lines that hold only spans
    expected_oi = {
        c["request_id"] for c in _jsonl(ADAPTER_FIXTURES / "openinference" / "calls.jsonl") if not c["reason"]
    }
    assert sources["phoenix_spans.jsonl"] == expected_oi and len(expected_oi) == 6
    assert len(sources["observations_page.json"]) == 6 and len(sources["anthropic_xml.jsonl"]) == 4
    assert reading.records == 16
    # what the adapters refused is counted, never examined: calls by reason, source lines by reason
    assert reading.calls_rejected == {
        "content_redacted": 2,
        "content_truncated": 2,
        "retrieval_not_paired": 1,
    }
    assert reading.rejected == {"invalid_json": 1}  # phoenix_spans.jsonl line 2, cut mid-write
    assert any("other.json" in n and "unknown_trace_format" in n for n in reading.notes)
    # the records of a trace file go through build_frames like any: every surface gets a verdict
    report = doctor(traces, config, now=NOW)
    assert {(f.surface, f.records) for f in report.fits} == {
        ("anthropic_xml", 4),
        ("default", 1),
        ("help-center", 8),
        ("returns", 3),
    }
    assert report.ok  # the records the adapters rebuilt hold their chunks as the app rendered them
    assert sum(f.records for f in report.fits) == 16 and not report.rejected


def test_cli_says_which_format_each_file_was_read_as(traces, capsys, no_ambient_config):
    main(["doctor", "--logs", str(traces)])
    out = capsys.readouterr().out
    assert "citegate doctor: 16 records from 4 files" in out
    assert "  read as citegate-log/1: anthropic_xml.jsonl\n" in out
    assert "  read as langfuse: observations_page.json (" in out
    assert "  read as openinference: phoenix_spans.jsonl (34 source lines (8 hold calls" in out
    assert "  not read (unknown_trace_format): other.json\n" in out
    assert "5 trace calls not converted (" in out and "retrieval_not_paired 1" in out


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
