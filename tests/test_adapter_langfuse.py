"""The Langfuse adapter on observations the real `langfuse` SDK exported
(scripts/record_langfuse_fixtures.py): both layouts (an observations API page, pretty-printed; the blob-storage JSONL
export) give the same calls, every planted citation gets its planted provenance reason, and every reject its reason."""

import json
from collections import Counter
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets.guard import check_citations
from citegate_assets.lib.ingest.adapters.base import AdapterSettings, Call, LineReject
from citegate_assets.lib.ingest.adapters.langfuse import ADAPTER, _read, paired_retrievers
from citegate_assets.lib.ingest.records import Record, parse_record

FIXTURES = Path(__file__).parent / "fixtures" / "adapters" / "langfuse"
LAYOUTS = ["observations_page.json", "observations_export.jsonl"]
NOW = datetime(2026, 11, 21, tzinfo=timezone.utc)
REASONS = {
    "ok",
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
}


def _lines(name: str) -> list[tuple[int, bytes]]:
    return list(enumerate((FIXTURES / name).read_bytes().splitlines(), start=1))


def _convert(name: str, settings: AdapterSettings = AdapterSettings()) -> list[Call | LineReject]:
    return list(ADAPTER.convert(_lines(name), settings))


def _expected() -> dict:
    return json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))


def _records(name: str) -> dict[str, dict]:
    return {c.request_id: c.record for c in _convert(name) if isinstance(c, Call) and c.record is not None}


def test_the_fixture_set_plants_every_reason():
    truth = _expected()
    assert set(truth["calls"]) == {"q1", "q2", "q3a", "q3b", "q4", "q5", "q6", "q7", "rewrite"}
    assert {c["expected_reason"] for c in truth["citations"]} == REASONS
    assert {r["reason"] for r in truth["rejects"]} == {"content_redacted", "content_truncated", "retrieval_not_paired"}
    assert (FIXTURES / "README.md").exists()


@pytest.mark.parametrize("name", LAYOUTS)
def test_every_generation_is_one_call_and_every_bad_line_a_reject(name):
    truth = _expected()
    items = _convert(name)
    calls = [i for i in items if isinstance(i, Call)]
    assert sorted(c.request_id or "" for c in calls) == sorted(truth["calls"].values())
    rejects = {c.request_id: c.reason for c in calls if c.record is None}
    assert rejects == {r["request_id"]: r["reason"] for r in truth["rejects"]}
    line_rejects = [(i.line_no, i.reason) for i in items if isinstance(i, LineReject)]
    assert line_rejects == [(r["line_no"], r["reason"]) for r in truth["line_rejects"] if r["file"] == name]
    assert [i.line_no for i in items] == sorted(i.line_no for i in items)  # source order


def test_a_page_spread_over_lines_is_one_document_and_its_calls_carry_its_first_line():
    assert len(_lines("observations_page.json")) > 100  # pretty-printed
    assert {i.line_no for i in _convert("observations_page.json")} == {1}
    export = _convert("observations_export.jsonl")
    assert len({i.line_no for i in export}) == len(export)  # one observation per line


def test_a_page_cut_short_is_one_invalid_json_reject():
    items = _convert("observations_page_cut.json")
    assert len(items) == 1 and isinstance(items[0], LineReject)
    assert items[0].reason == "invalid_json" and items[0].line_no == 1


def test_both_layouts_give_the_same_records():
    page, export = _records("observations_page.json"), _records("observations_export.jsonl")
    assert page == export and len(page) == 6


@pytest.mark.parametrize("name", LAYOUTS)
def test_records_are_valid_citegate_log_records(name):
    truth = _expected()
    for request_id, obj in _records(name).items():
        rec = parse_record(obj, NOW)
        assert isinstance(rec, Record), (request_id, rec)
        assert rec.prompt_reconstructed and rec.prompt_encoding == "json" and rec.template is None
        assert rec.answer_model == "gpt-4.1-mini-2025-04-14"
        assert rec.logged_at.date() == date(2026, 11, 20)
        assert rec.surface == ("default" if request_id == truth["calls"]["q7"] else "help-center")
        assert [r["rank"] for r in rec.retrieved] == list(range(1, len(rec.retrieved) + 1))
        if request_id == truth["calls"]["q7"]:
            assert rec.answer_reject is not None and rec.answer_reject.reason == "citations_not_json"
        else:
            assert rec.answer_reject is None and rec.citations


def test_logged_at_is_the_generation_start_time():
    page = json.loads((FIXTURES / "observations_page.json").read_text(encoding="utf-8"))
    starts = {o["id"]: o["startTime"] for o in page["data"]}
    for request_id, rec in _records("observations_page.json").items():
        assert rec["logged_at"] == starts[request_id][:-1] + "000Z"  # ms in the API, µs in the record


@pytest.mark.parametrize("name", LAYOUTS)
def test_every_citation_gets_its_planted_reason(name):
    records = _records(name)
    got = {}
    for request_id, rec in records.items():
        if isinstance(rec["citations"], str):
            continue  # q7: an answer reject, no citations to check
        report = check_citations(rec["prompt"], rec["retrieved"], rec["citations"], encoding=rec["prompt_encoding"])
        for c in report.citations:
            got[(request_id, c.position)] = (c.chunk_id, c.reason)
    want = {(t["request_id"], t["position"]): (t["chunk_id"], t["expected_reason"]) for t in _expected()["citations"]}
    assert got == want
    assert Counter(r for _, r in want.values())["ok"] == 6


def test_pairing_takes_the_nearest_ancestors_finished_retrievers():
    truth = _expected()
    records = _records("observations_export.jsonl")
    ids = {
        key: [r["chunk_id"] for r in records[rid]["retrieved"]] for key, rid in truth["calls"].items() if rid in records
    }
    # q3b: turn 2 of a two-turn trace: its own retriever (same parent) first, then turn 1's (common grandparent)
    assert ids["q3b"] == ["kb-privacy#1", "kb-privacy#3", "kb-warranty#2", "kb-shipping#1"]
    assert ids["q3a"] == ["kb-warranty#2", "kb-shipping#1"]
    # q6: the retriever that ran after the rewrite call and before the answer call
    assert ids["q6"] == ["kb-privacy#3", "kb-privacy#1"]
    # ids from Document.id (q1) and from metadata chunk_id (q2); rank = position, the rank-5 chunk kept
    assert ids["q1"] == ["kb-refunds#1", "kb-refunds#2", "kb-store-credit#1", "kb-shipping#1", "kb-shipping#4"]
    assert ids["q2"] == ["kb-store-credit#1", "kb-refunds#1", "kb-warranty#2", "kb-shipping#1", "kb-refunds#2"]
    assert all(r["text"] for rid in records for r in records[rid]["retrieved"])


def test_paired_retrievers_on_the_observation_tree():
    truth = _expected()
    observations, _ = _read(_lines("observations_export.jsonl"))
    by_id = {o.id: o for o in observations}
    turn1, turn2 = by_id[truth["calls"]["q3a"]], by_id[truth["calls"]["q3b"]]
    [own] = paired_retrievers(turn1, observations)  # turn 2's retriever had not run yet
    assert own.parent_id == turn1.parent_id
    nearest, earlier = paired_retrievers(turn2, observations)
    assert nearest.parent_id == turn2.parent_id and earlier == own and earlier.end is not None
    assert earlier.end <= turn2.start
    assert paired_retrievers(by_id[truth["calls"]["rewrite"]], observations) == []  # the retriever ran after it


def test_the_chunk_id_key_and_citations_path_come_from_settings():
    truth = _expected()
    converted = _convert("observations_export.jsonl", AdapterSettings(chunk_id_key="doc"))
    items = {c.request_id: c for c in converted if isinstance(c, Call)}
    q2 = items[truth["calls"]["q2"]]
    assert q2.record is None and q2.reason == "not_of_format" and "metadata 'doc'" in (q2.detail or "")
    assert items[truth["calls"]["q1"]].record is not None  # its documents carry an id
    other = _convert("observations_export.jsonl", AdapterSettings(citations_path="sources", surface_key="team"))
    for call in other:
        if isinstance(call, Call) and call.record is not None:
            assert isinstance(call.record["citations"], str)  # no list there: the raw answer, for answer_rejects
            assert call.record["surface"] == "default"


def test_detects_its_files_and_not_a_citegate_log():
    for name in (*LAYOUTS, "observations_page_cut.json"):
        assert ADAPTER.detect(_lines(name)[0][1]), name
        assert ADAPTER.detect_head((FIXTURES / name).read_bytes()[:4096]), name
    framework = Path(__file__).parent / "fixtures" / "frameworks" / "langchain_stuff_chat.jsonl"
    first = framework.read_bytes().splitlines()[0]
    assert not ADAPTER.detect(first) and not ADAPTER.detect_head(first)


def test_conversion_is_deterministic():
    assert _convert("observations_export.jsonl") == _convert("observations_export.jsonl")


def test_ingested_calls_land_once_with_their_planted_reasons(tmp_path):
    """Through ingest and the provenance gate: the converted calls of both layouts land once (the second layout's
    are duplicate_request_id, same prompt), a rerun adds nothing, and every citation gets its planted reason."""
    from citegate_assets.lib.config import parse_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.provenance.gate import check_provenance
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing = tmp_path / "landing"
    landing.mkdir()
    for i, name in enumerate(LAYOUTS):
        lines = [json.dumps(rec) for rec in _records(name).values()]
        (landing / f"converted-{i}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = parse_config({}, None)
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        first = ingest_landing(con, landing, config, final=True, now=NOW)
        assert (first.records_ingested, first.records_rejected, first.answers_rejected) == (6, 6, 1)
        again = ingest_landing(con, landing, config, final=True, now=NOW)
        assert again.records_ingested == 0 and again.records_rejected == 0
        check_provenance(con, date(2026, 11, 20), date(2026, 11, 21))
        got = dict(con.sql("select citation_id, reason from provenance_results").fetchall())
        reconstructed = con.sql("select count(*) from prompts where prompt_reconstructed").fetchall()
    want = {f"{t['request_id']}#{t['position']}": t["expected_reason"] for t in _expected()["citations"]}
    assert got == want
    assert reconstructed == [(6,)]


def test_a_vector_store_documents_chunk_id_comes_from_metadata_not_the_store_uuid(tmp_path):
    """LangChain's InMemoryVectorStore under Langfuse's LangChain handler (observations_vectorstore.jsonl): each
    document's `id` is the store's UUID, its metadata holds the chunk id the prompt and the citations use."""
    import shutil
    from datetime import date

    from citegate_assets.lib.config import parse_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.provenance.gate import check_provenance
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    truth = json.loads((FIXTURES / "expected_vectorstore.json").read_text(encoding="utf-8"))
    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(FIXTURES / "observations_vectorstore.jsonl", landing / "observations_vectorstore.jsonl")
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        ingest_landing(con, landing, parse_config({}, None), final=True)
        assert con.sql("select reason from ingest_rejects").fetchall() == []
        rows = con.sql("select chunk_id, rank, doc_id from retrievals order by rank").fetchall()
        assert [c for c, _, _ in rows] == truth["retrieved"]
        assert all(len(doc_id) == 36 and doc_id.count("-") == 4 for _, _, doc_id in rows)  # the store's UUID kept
        check_provenance(con, date(2026, 11, 1), date(2026, 12, 1))
        got = {
            int(c.rsplit("#", 1)[1]): r
            for c, r in con.sql("select citation_id, reason from provenance_results").fetchall()
        }
        assert got == {c["position"]: c["expected_reason"] for c in truth["citations"]}
        assert set(got.values()) == {"ok", "dropped_before_prompt", "fabricated_id", "span_in_other_chunk"}
