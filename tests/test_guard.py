"""The call-time guard gives, for every citation, the reason, offsets and missing numbers the pipeline records —
on the generated demo logs (auto and every named profile) and on prompts rendered by the real frameworks."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets import guard
from citegate_assets.lib import loggen
from citegate_assets.lib.config import load_config, parse_config
from citegate_assets.lib.core.lines import ReadState, open_stream, read_lines
from citegate_assets.lib.ingest.landing import landing_entries, landing_root, open_entry
from citegate_assets.lib.ingest.records import Record, parse_line
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.provenance.passages import cited_passages
from citegate_assets.lib.storage.warehouse import connect, ensure_schema
from citegate_assets.lib.support.numbers import missing_quantities

from .helpers import scenario_record

PROJECT = Path(__file__).resolve().parents[1]
FIXTURES = PROJECT / "tests" / "fixtures" / "frameworks"
NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)


def _pipeline(tmp_path: Path, landing: Path, config) -> tuple[dict, dict]:
    with connect(tmp_path / "pipeline.duckdb") as con:
        ensure_schema(con)
        ingest_landing(con, landing, config, final=True, now=NOW)
        check_provenance(con, date(2020, 1, 1), date(2027, 1, 1))
        rows = con.sql(
            "select citation_id, reason, found_start, found_end, chunk_share_in_prompt from provenance_results"
        ).fetchall()
        passages = (
            cited_passages(con, date(2020, 1, 1), date(2027, 1, 1)).select("citation_id", "claim", "passage").rows()
        )
    results = {
        cid: (reason, start, end, None if share is None else round(share, 4)) for cid, reason, start, end, share in rows
    }
    numeric = {
        cid: sorted(f"{q.value} {q.unit}" if q.unit else q.value for q in missing_quantities(claim, passage))
        for cid, claim, passage in passages
    }
    return results, numeric


def _records(landing: Path):
    seen = set()
    root = landing_root(landing)
    for entry in landing_entries(root):
        with open_entry(root, entry) as (fh, _):
            for line in read_lines(open_stream(fh, entry.compressed), ReadState(), max_line_bytes=1 << 25, final=True):
                try:
                    rec = parse_line(line.raw.decode("utf-8").lstrip("\ufeff"), NOW)
                except UnicodeDecodeError:
                    continue
                if isinstance(rec, Record) and rec.citations is not None and rec.request_id not in seen:
                    seen.add(rec.request_id)
                    yield rec


def _guard(landing: Path, config) -> tuple[dict, dict]:
    results, numeric = {}, {}
    for rec in _records(landing):
        template = rec.template or config.surface(rec.surface).template
        try:
            report = guard.check_citations(
                rec.prompt, rec.retrieved, rec.citations, encoding=rec.prompt_encoding, template=template, config=config
            )
        except ValueError:
            continue  # the pipeline rejects these answers too (citation_empty_field, unknown template)
        for c in report.citations:
            cid = f"{rec.request_id}#{c.position}"
            share = None if c.chunk_share_in_prompt is None else round(c.chunk_share_in_prompt, 4)
            results[cid] = (c.reason, c.found_start, c.found_end, share)
            if c.reason == "ok":
                numeric[cid] = sorted(c.missing_quantities)
    return results, numeric


def _assert_equal(pipeline, guarded):
    (p_results, p_numeric), (g_results, g_numeric) = pipeline, guarded
    assert set(g_results) == set(p_results)
    wrong = {cid: (p_results[cid], g_results[cid]) for cid in p_results if p_results[cid] != g_results[cid]}
    assert not wrong, f"{len(wrong)} of {len(p_results)}: {dict(list(wrong.items())[:10])}"
    assert g_numeric == p_numeric


def test_guard_equals_the_pipeline_on_demo_logs(tmp_path):
    landing = tmp_path / "landing"
    # half the records name their profile: both paths
    loggen.generate_logs(landing, days=2, requests_per_day=150, seed=23, templates_in_records=True)
    config = load_config(PROJECT / "citegate.toml")
    pipeline = _pipeline(tmp_path, landing, config)
    assert len(pipeline[0]) > 800
    assert len({reason for reason, *_ in pipeline[0].values()}) == 7
    _assert_equal(pipeline, _guard(landing, config))


def test_guard_equals_the_pipeline_on_real_framework_prompts(tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    for path in FIXTURES.glob("*.jsonl"):
        if path.name != "truth.jsonl":
            (landing / path.name).write_bytes(path.read_bytes())
    config = parse_config({}, None)
    pipeline = _pipeline(tmp_path, landing, config)
    assert len(pipeline[0]) == 310
    _assert_equal(pipeline, _guard(landing, config))


@pytest.mark.parametrize(
    "template,encoding",
    [
        ("anthropic-xml", "json"),
        ("llamaindex-citation", "text"),
        ("langchain-stuff-mustache", "json"),
        ("plain-list", "python_repr"),
    ],
)
def test_guard_equals_the_pipeline_with_each_named_profile(template, encoding, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.jsonl").write_text(json.dumps(scenario_record(template, encoding)) + "\n")
    config = parse_config({}, None)
    _assert_equal(_pipeline(tmp_path, landing, config), _guard(landing, config))


def test_check_prompt_reports_each_chunk_and_raise_on_fails_loudly():
    record = scenario_record("plain-list", "text")
    report = guard.check_prompt(record["prompt"], record["retrieved"])
    assert [(c.chunk_id, c.arrived) for c in report.chunks] == [
        ("kb-1#c1", "whole"),
        ("kb-2#c1", "whole"),
        ("kb-3#c2", "cut"),
        ("kb-4#c1", "missing"),
    ]
    assert 0.4 < report.chunks[2].share < 0.6 and report.context_found
    with pytest.raises(guard.GuardError) as err:
        guard.check_prompt(record["prompt"], record["retrieved"], raise_on={"cut", "missing"})
    assert err.value.failures == ["kb-3#c2: cut", "kb-4#c1: missing"]
    with pytest.raises(guard.GuardError, match="fabricated_id") as err:
        guard.check_citations(
            record["prompt"], record["retrieved"], record["citations"], raise_on={"fabricated_id", "span_truncated"}
        )
    assert err.value.failures == ["citation 1 (kb-9#c9): fabricated_id", "citation 3 (kb-3#c2): span_truncated"]


def test_no_context_is_never_a_pass():
    result = guard.check_citations(
        "Just a question, no sources.",
        [{"chunk_id": "a", "text": "Refunds take 3 days."}],
        [{"chunk_id": "a", "span": "Refunds take 3 days.", "claim": "Refunds take 3 days."}],
    )
    assert not result.prompt.context_found
    assert [c.reason for c in result.citations] == ["context_not_found"] and not result.ok


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match=r"retrieved\[0\]\.chunk_id"):
        guard.check_prompt("p", [{"text": "t"}])
    with pytest.raises(ValueError, match="citations"):
        guard.check_citations("p", [], "not json")
    with pytest.raises(ValueError, match="template 'nope'"):
        guard.check_prompt("p", [], template="nope")


def test_to_log_record_is_a_valid_citegate_log_line(tmp_path):
    record = scenario_record("plain-list", "text")
    line = guard.to_log_record(
        request_id="r-1",
        surface="s",
        answer_model="m",
        prompt=record["prompt"],
        retrieved=record["retrieved"],
        citations=record["citations"],
        logged_at=datetime(2026, 11, 2, 10, tzinfo=timezone.utc),
    )
    parsed = parse_line(json.dumps(line), NOW)
    assert (
        isinstance(parsed, Record) and parsed.request_id == "r-1" and len(parsed.citations) == len(record["citations"])
    )


def test_the_guard_imports_no_dagster_duckdb_or_polars():
    code = (
        "import sys, citegate_assets.guard; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dagster', 'duckdb', 'polars', 'pyarrow'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT)
    assert out.stdout.strip() == "[]"
