"""The framework fixtures are well-formed: real prompts rendered by LlamaIndex, LangChain, the
openai / anthropic SDKs and a vLLM-style log, committed by scripts/render_fixtures.py with their planted
truth. No framework is needed here; tests/fixtures/frameworks/README.md says how they were made."""

import json
import shutil
from collections import Counter, defaultdict
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets.lib.ingest.records import Record, parse_line

FIXTURES = Path(__file__).parent / "fixtures" / "frameworks"
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)
REASONS = {
    "ok",
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
}
FILES = sorted(FIXTURES.glob("*.jsonl"))
LOG_FILES = [f for f in FILES if f.name != "truth.jsonl"]


def _truth() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "truth.jsonl").read_text(encoding="utf-8").splitlines()]


def _records(path: Path) -> list[Record]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = parse_line(line, NOW)
        assert isinstance(rec, Record), (path.name, rec)
        out.append(rec)
    return out


def test_the_fixture_set_is_there():
    assert {f.stem for f in LOG_FILES} >= {
        "llamaindex_citation",
        "llamaindex_citation_multimodal",
        "llamaindex_text_qa",
        "langchain_stuff_chat",
        "langchain_stuff_responses",
        "langchain_stuff_completions",
        "langchain_stuff_mustache",
        "anthropic_xml",
        "anthropic_document_blocks",
        "anthropic_search_results",
        "vllm_llama3",
    }
    assert (FIXTURES / "README.md").exists()


@pytest.mark.parametrize("path", LOG_FILES, ids=lambda p: p.stem)
def test_every_line_is_a_citegate_log_record(path):
    records = _records(path)
    assert 0 < len(records) <= 30
    for rec in records:
        assert rec.template is None  # citegate's default profile applies
        assert rec.surface == path.stem
        assert rec.prompt_encoding == ("python_repr" if path.stem == "vllm_llama3" else "json")
        assert rec.citations and rec.answer_reject is None
        assert rec.retrieved and rec.logged_at.date() >= date(2026, 11, 1)
        assert len(rec.prompt) < 8000


def test_request_ids_are_unique_across_files():
    ids = [rec.request_id for path in LOG_FILES for rec in _records(path)]
    assert len(ids) == len(set(ids))


def test_truth_and_citations_match_one_to_one():
    citations = {}
    for path in LOG_FILES:
        for rec in _records(path):
            for pos, cit in enumerate(rec.citations):
                citations[(path.name, rec.request_id, pos)] = cit
    truth = _truth()
    keys = [(t["file"], t["request_id"], t["position"]) for t in truth]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(citations)
    for t in truth:
        cit = citations[(t["file"], t["request_id"], t["position"])]
        assert cit["chunk_id"] == t["chunk_id"], t
        assert t["expected_reason"] in REASONS and t["note"]


def test_every_format_plants_every_reason():
    per_file = defaultdict(Counter)
    for t in _truth():
        per_file[t["file"]][t["expected_reason"]] += 1
    assert set(per_file) == {p.name for p in LOG_FILES}
    for name, counts in per_file.items():
        assert set(counts) == REASONS, (name, counts)


# the named built-in profile that fits each format (formats with none are auto's alone)
FITS = {
    "anthropic_xml.jsonl": "anthropic-xml",
    "llamaindex_citation.jsonl": "llamaindex-citation",
    "llamaindex_citation_multimodal.jsonl": "llamaindex-citation",
    "langchain_stuff_chat.jsonl": "langchain-stuff",
    "langchain_stuff_responses.jsonl": "langchain-stuff",
    "langchain_stuff_mustache.jsonl": "langchain-stuff-mustache",
    "vllm_llama3.jsonl": "plain-list",
}


def _reasons(tmp_path, files: list[Path], template: str) -> dict[str, str]:
    from citegate_assets.lib.config import parse_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.provenance.gate import check_provenance
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing = tmp_path / f"landing-{template}"
    landing.mkdir()
    for path in files:
        shutil.copy(path, landing / path.name)
    config = parse_config({"surfaces": {"default": {"template": template}}}, None)
    with connect(tmp_path / f"{template}.duckdb") as con:
        ensure_schema(con)
        summary = ingest_landing(con, landing, config, final=True)
        assert summary.records_rejected == 0 and summary.answers_rejected == 0
        check_provenance(con, date(2026, 11, 1), date(2026, 11, 30))
        return dict(con.sql("select citation_id, reason from provenance_results").fetchall())


def _expected(files: list[Path]) -> dict[str, str]:
    names = {p.name for p in files}
    return {f"{t['request_id']}#{t['position']}": t["expected_reason"] for t in _truth() if t["file"] in names}


def test_every_citation_gets_its_planted_reason_with_template_auto(tmp_path):
    """No template configured anywhere: every citation of every real framework's prompt gets its planted reason."""
    expected = _expected(LOG_FILES)
    got = _reasons(tmp_path, LOG_FILES, "auto")
    wrong = {cid: (want, got.get(cid)) for cid, want in expected.items() if got.get(cid) != want}
    assert not wrong, f"{len(wrong)} of {len(expected)} citations: {dict(list(wrong.items())[:20])}"
    assert len(expected) == 310


@pytest.mark.parametrize("name,template", sorted(FITS.items()))
def test_each_named_profile_agrees_with_auto_where_it_fits(name, template, tmp_path):
    files = [p for p in LOG_FILES if p.name == name]
    named = _reasons(tmp_path, files, template)
    assert named == _reasons(tmp_path, files, "auto") == _expected(files)


def test_each_retrieved_text_of_a_real_request_body_is_stored_once_and_reads_back(tmp_path):
    """Schema 13 on the SDKs' own request bodies (JSON chat messages, escaped as the openai and anthropic clients
    write them): every retrieved text the prompt holds, verbatim or escaped, is not stored a second time, and the
    docs/warehouse.md's read-back gives exactly the text as logged, for every retrieval of every file."""
    from citegate_assets.lib.storage.warehouse import connect

    from .helpers import RAW_TEXT

    _reasons(tmp_path, LOG_FILES, "auto")
    logged = {
        (rec.request_id, i): r["text"]
        for path in LOG_FILES
        for rec in _records(path)
        for i, r in enumerate(rec.retrieved)
    }
    with connect(tmp_path / "auto.duckdb", read_only=True) as con:
        read_back = {(rid, pos): text for rid, pos, text in con.sql(RAW_TEXT).fetchall()}
        rows = con.sql(
            "select p.prompt_encoding, p.prompt_raw, r.text, r.raw_encoding, r.request_id, r.position "
            "from retrievals r join prompts p using (request_id, day)"
        ).fetchall()
    assert read_back == logged
    stored_once = Counter()
    for encoding, raw, text, raw_encoding, rid, pos in rows:
        forms = {
            logged[rid, pos],
            json.dumps(logged[rid, pos])[1:-1],
            json.dumps(logged[rid, pos], ensure_ascii=False)[1:-1],
        }
        held = any(form in raw for form in forms)
        assert (text is None) == held, (rid, pos)  # stored once exactly where the prompt holds it
        if raw_encoding == "json":
            stored_once[encoding] += 1
    assert stored_once["json"] > 50  # the SDKs' bodies hold the texts escaped
