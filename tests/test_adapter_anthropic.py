"""The Anthropic exchange adapter on the exchanges the real anthropic 2.14.0 SDK sent to a loopback
server (scripts/record_anthropic_fixtures.py), and the provenance gate's `location_mismatch` on a real DuckDB file.
"""

from __future__ import annotations

import json
import shutil
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets.lib.core.lines import Line
from citegate_assets.lib.ingest.adapters.anthropic import ADAPTER, UNVERIFIABLE, convert_line
from citegate_assets.lib.ingest.adapters.base import AdapterSettings, Call, LineReject
from citegate_assets.lib.ingest.records import Record, parse_raw_line

FIXTURES = Path(__file__).parent / "fixtures" / "adapters" / "anthropic"
EXCHANGES = FIXTURES / "exchanges.jsonl"
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)
SETTINGS = AdapterSettings()

REFUNDS = (
    "Refunds to the original card are issued within 5 business days of approval. "
    "Approval itself takes one business day."
)
GIFT = ("Gift cards are not refundable.", "A lost gift card can be reissued once.")
PLANS = ("Annual plans are refunded pro rata for the unused months.", "Monthly plans are not refunded after 14 days.")
CREDIT = "Store credit is applied immediately and never expires."


def _lines() -> list[bytes]:
    return EXCHANGES.read_bytes().splitlines()


def _calls() -> list[Call]:
    out = list(ADAPTER.convert(enumerate(_lines(), 1), SETTINGS))
    assert all(isinstance(c, Call) and c.reason is None and c.record is not None for c in out), out
    return out  # type: ignore[return-value]


def _records() -> dict[str, dict]:
    return {c.request_id: c.record for c in _calls() if c.request_id and c.record}


def _expected() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "expected.jsonl").read_text(encoding="utf-8").splitlines()]


def _citation_expectations() -> dict[str, dict]:
    return {f"{e['request_id']}#{e['position']}": e for e in _expected() if "position" in e}


# --- detection ------------------------------------------------------------------------------------


def test_detect_recognises_exchanges_and_nothing_else():
    assert ADAPTER.detect(_lines()[0])
    assert ADAPTER.name == "anthropic"
    framework_line = (Path(__file__).parent / "fixtures" / "frameworks" / "anthropic_search_results.jsonl").read_bytes()
    assert not ADAPTER.detect(framework_line.splitlines()[0])  # a citegate-log/1 line holding an Anthropic body
    for other in (
        b'{"resourceSpans": []}',
        b'{"context": {"span_id": "c2"}, "span_kind": "LLM"}',
        b'{"id": "obs-1", "traceId": "t", "type": "GENERATION"}',
        b'{"request": {}, "response": {"type": "error", "error": {"type": "overloaded_error"}}}',
        b'{"request": {}, "response": {"type": "message"}, "prompt": "x"}',
        b"not json",
        b"[1, 2]",
        b"",
    ):
        assert not ADAPTER.detect(other), other


# --- conversion of the recorded fixture ------------------------------------------------------------


def test_every_record_field():
    lines = [json.loads(line) for line in _lines()]
    calls = _calls()
    assert [c.line_no for c in calls] == list(range(1, 11))
    assert [c.request_id for c in calls] == [f"msg_fx_anthropic_{n:02d}" for n in range(1, 11)]
    for call, line in zip(calls, lines):
        rec = call.record
        assert rec is not None
        assert set(rec) == {
            "request_id",
            "logged_at",
            "surface",
            "answer_model",
            "prompt",
            "prompt_encoding",
            "retrieved",
            "answer",
            "citations",
        }  # no prompt_reconstructed: the body is the one sent
        assert rec["request_id"] == line["response"]["id"] == call.request_id
        assert rec["logged_at"] == line["logged_at"]
        assert rec["surface"] == "help-center"
        assert rec["answer_model"] == line["response"]["model"] == "claude-sonnet-4-6"
        assert rec["prompt_encoding"] == "json"
        if isinstance(line["request"], str):  # logged as the raw body text: kept byte for byte
            assert rec["prompt"] == line["request"]
        else:  # logged as the parsed body: re-serialized, same content and key order
            assert rec["prompt"] == json.dumps(line["request"], ensure_ascii=False)
        assert json.loads(rec["prompt"])["messages"]
        assert rec["answer"] == "".join(b["text"] for b in line["response"]["content"] if b["type"] == "text")
    assert isinstance(lines[0]["request"], str) and all(isinstance(x["request"], dict) for x in lines[1:])


def test_retrieved_is_the_citable_blocks_unless_the_app_logged_its_own():
    recs = _records()
    assert recs["msg_fx_anthropic_01"]["retrieved"] == [
        {"chunk_id": "kb-112#3", "rank": 1, "text": REFUNDS},  # document, text source: its source.data
        {"chunk_id": "kb-301#1", "rank": 2, "text": "\n\n".join(GIFT)},  # document, content source: its blocks
        {"chunk_id": "kb-200#1", "rank": 3, "text": "\n\n".join(PLANS)},  # search result: source, its blocks
        {"chunk_id": "kb-087#1", "rank": 4, "text": CREDIT},  # id from the JSON context (chunk_id_key)
    ]
    # the base64 PDF has no text citegate can read: left out, its rank (1) skipped
    assert recs["msg_fx_anthropic_03"]["retrieved"] == [{"chunk_id": "kb-112#3", "rank": 2, "text": REFUNDS}]
    # search results count across the user turn and the tool result, in the order sent
    assert [(r["chunk_id"], r["rank"]) for r in recs["msg_fx_anthropic_07"]["retrieved"]] == [
        ("kb-640#1", 1),
        ("kb-200#1", 2),
        ("kb-301#1", 3),
    ]
    lines = {json.loads(line)["response"]["id"]: json.loads(line) for line in _lines()}
    for rid in ("msg_fx_anthropic_04", "msg_fx_anthropic_05", "msg_fx_anthropic_08"):
        assert recs[rid]["retrieved"] == lines[rid]["retrieved"]  # the app's own retrieval log, as logged


def test_each_citation_chunk_span_claim_and_location_mismatch():
    recs = _records()
    expected = _citation_expectations()
    seen = set()
    for rid, rec in recs.items():
        if isinstance(rec["citations"], str):
            continue
        for pos, cit in enumerate(rec["citations"]):
            e = expected[f"{rid}#{pos}"]
            seen.add(f"{rid}#{pos}")
            assert cit["chunk_id"] == e["chunk_id"], (rid, pos)
            # the API located native citations; a list at citations_path is the app's own (structured)
            assert cit.get("origin") == (None if rid == "msg_fx_anthropic_05" else "native"), (rid, pos)
            if e["location_mismatch"] is None:
                assert cit.get("location_mismatch") is None, (rid, pos, cit)
            else:
                assert e["location_mismatch"] in cit["location_mismatch"], (rid, pos, cit)
    assert seen == set(expected)

    one = recs["msg_fx_anthropic_01"]["citations"]
    sentence_1 = "Card refunds are issued within 5 business days of approval."
    assert one[0] == {
        "chunk_id": "kb-112#3",
        "span": "Refunds to the original card are issued within 5 business days of approval. ",  # cited_text
        "claim": sentence_1,  # the sentence around the cited text block "within 5 business days of approval"
        "location_mismatch": None,
        "origin": "native",  # the API located it, not the model
    }
    # a block location over two blocks: the API joins the cited blocks with nothing; verified, the span is
    # written with the blank line the decoded prompt has between them, so the gate finds it
    assert one[1]["span"] == "\n\n".join(GIFT)
    assert one[1]["claim"] == "Gift cards cannot be refunded but can be reissued once."
    assert one[2]["span"] == PLANS[0] and one[2]["claim"] == one[3]["claim"]
    assert one[3]["claim"] == "Annual plans are refunded pro rata, and store credit never expires."

    two = recs["msg_fx_anthropic_02"]["citations"]
    assert two[0]["location_mismatch"] == (
        'document 0 chars 10-85: expected "Refunds to the original card are issued within 5 business d…", '
        'found " the original card are issued within 5 business days of app…"; the cited text is at chars 0-75'
    )
    assert two[1]["location_mismatch"] == (
        'search_result_index 0 is source "kb-200#1"; the citation names source "kb-201#4"'
    )
    assert two[2]["location_mismatch"] == "document_index 7: the request as logged has 3 documents"
    assert two[3]["location_mismatch"] == (
        'document 1 blocks 1-2: expected "Gift cards are not refundable.", '
        'found "A lost gift card can be reissued once."'
    )
    three = recs["msg_fx_anthropic_03"]["citations"]
    assert three[0]["location_mismatch"].startswith(UNVERIFIABLE)
    assert three[0]["chunk_id"] == "card-terms.pdf"  # the PDF's title
    assert three[2]["location_mismatch"].startswith(UNVERIFIABLE)
    four = recs["msg_fx_anthropic_04"]["citations"]
    assert four[1]["location_mismatch"] == (
        "document 0 chars 116-170: outside the document as logged (115 chars); the cited text is not in it"
    )


def test_answer_json_citations_and_answer_rejects():
    recs = _records()
    five = recs["msg_fx_anthropic_05"]["citations"]  # no native citations: the list at citations_path
    assert len(five) == 7 and all(set(c) == {"chunk_id", "span", "claim"} for c in five)
    assert five[0] == {
        "chunk_id": "kb-087#1",
        "span": "Store credit is applied immediately",
        "claim": "Store credit is immediate.",
    }
    # no native citations, no JSON: the answer itself is the raw citations field, which ingest rejects
    assert recs["msg_fx_anthropic_06"]["citations"] == "Card refunds take about five business days."


def test_every_record_is_a_valid_citegate_log_line():
    expected_rejects = {e["request_id"]: e["answer_reject"] for e in _expected() if "answer_reject" in e}
    for no, rec in enumerate(_records().values(), 1):
        parsed, _ = parse_raw_line(Line(no, json.dumps(rec).encode(), 0, False), NOW, 1 << 25)
        assert isinstance(parsed, Record), parsed
        assert parsed.prompt_encoding == "json" and parsed.logged_at.date() == date(2026, 11, 6)
        if parsed.request_id in expected_rejects:
            assert parsed.answer_reject is not None
            assert parsed.answer_reject.reason == expected_rejects[parsed.request_id]
        else:
            assert parsed.answer_reject is None and parsed.citations


# --- bad lines --------------------------------------------------------------------------------------


def _one(raw: bytes, settings: AdapterSettings = SETTINGS, line_no: int = 2) -> Call | LineReject:
    return convert_line(line_no, raw, settings)


def _exchange(**over) -> dict:
    line = json.loads(_lines()[1])
    line.update(over)
    return line


def test_bad_lines_are_rejected_with_a_reason_never_dropped():
    assert _one(b"{oops") == LineReject(
        2, "invalid_json", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    assert _one(b"") == LineReject(2, "empty_line", "blank line")
    assert _one(b"\xff{}") == LineReject(2, "invalid_utf8", "not UTF-8 at byte 0")
    assert _one(b"[1]") == LineReject(2, "not_of_format", "line holds a JSON array, not an exchange object")
    assert _one(b'{"request": {}}') == LineReject(
        2, "not_of_format", "no 'request' and 'response' fields: not an Anthropic exchange"
    )
    err = _one(json.dumps(_exchange(response={"type": "error", "error": {"type": "overloaded_error"}})).encode())
    assert err == LineReject(2, "not_of_format", "'response' is not a Message (type 'error'): no answer")
    # a response that names its id: the reject is that call's
    line = _exchange()
    line["response"]["content"][0]["citations"][0].pop("cited_text")
    call = _one(json.dumps(line).encode())
    assert isinstance(call, Call) and call.record is None and call.request_id == "msg_fx_anthropic_02"
    assert (call.reason, call.detail) == (
        "not_of_format",
        "response.content[0].citations[0].cited_text is missing or not a string",
    )
    line = _exchange()
    line["response"]["content"][0]["citations"][0]["start_char_index"] = "10"
    call = _one(json.dumps(line).encode())
    assert (
        isinstance(call, Call)
        and call.detail == "response.content[0].citations[0].start_char_index is missing or not an integer"
    )
    call = _one(json.dumps(_exchange(request={"model": "m", "max_tokens": 5})).encode())
    assert isinstance(call, Call) and call.reason == "prompt_undecodable" and "has no 'messages'" in (call.detail or "")
    call = _one(json.dumps(_exchange(request='{"messages": [')).encode())
    assert isinstance(call, Call) and call.reason == "prompt_undecodable"
    call = _one(json.dumps(_exchange(request='"a rendered prompt"')).encode())
    assert isinstance(call, Call) and call.reason == "not_of_format"


def test_byte_order_mark_on_the_first_line_and_surface_default():
    line = _exchange()
    del line["surface"]
    call = convert_line(1, b"\xef\xbb\xbf" + json.dumps(line).encode(), AdapterSettings(default_surface="web"))
    assert isinstance(call, Call) and call.record is not None and call.record["surface"] == "web"


def test_shared_block_ids_are_made_unique_and_citations_path_is_followed():
    body = {
        "model": "m",
        "max_tokens": 9,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "search_result",
                        "source": "kb-1",
                        "title": "a",
                        "content": [{"type": "text", "text": "A."}],
                    },
                    {
                        "type": "search_result",
                        "source": "kb-1",
                        "title": "b",
                        "content": [{"type": "text", "text": "B."}],
                    },
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "C."}},
                    "q",
                ],
            }
        ],
    }
    answer = {"result": {"citations": [{"chunk_id": "doc0", "span": "C.", "claim": "C."}]}}
    line = {
        "request": body,
        "response": {
            "id": "msg_x",
            "type": "message",
            "model": "m",
            "content": [{"type": "text", "text": json.dumps(answer)}],
        },
        "logged_at": "2026-11-06T09:00:00Z",
    }
    call = _one(json.dumps(line).encode(), AdapterSettings(citations_path="result.citations"))
    assert isinstance(call, Call) and call.record is not None
    assert [r["chunk_id"] for r in call.record["retrieved"]] == ["kb-1@search_result0", "kb-1@search_result1", "doc0"]
    assert call.record["citations"] == answer["result"]["citations"]
    call = _one(json.dumps(line).encode(), AdapterSettings(citations_path="citations"))
    assert isinstance(call, Call) and call.record is not None
    assert call.record["citations"] == json.dumps(answer)  # no list there: the raw answer, for answer_rejects


# --- end to end on a real DuckDB file --------------------------------------------------------------


def _ingest(con, tmp_path: Path):
    """The converted records as citegate-log/1 lines in a landing folder, ingested; (landing, config)."""
    from citegate_assets.lib.config import parse_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.storage.warehouse import ensure_schema

    landing = tmp_path / "landing"
    landing.mkdir()
    text = "".join(json.dumps(r) + "\n" for r in _records().values())
    (landing / "anthropic.jsonl").write_text(text, encoding="utf-8")
    ensure_schema(con)
    config = parse_config({}, None)
    summary = ingest_landing(con, landing, config, final=True)
    assert (summary.records_ingested, summary.records_rejected, summary.answers_rejected) == (10, 0, 1)
    return landing, config


def _fill_location_mismatch(con) -> None:
    """What batch.py is to do (the integration helper): citations.location_mismatch from the record's citation."""
    for rec in _records().values():
        for pos, cit in enumerate(rec["citations"] if isinstance(rec["citations"], list) else []):
            if cit.get("location_mismatch"):
                con.execute(
                    "update citations set location_mismatch = ? where citation_id = ?",
                    [cit["location_mismatch"], f"{rec['request_id']}#{pos}"],
                )


def _gate(con) -> dict[str, tuple[str, str]]:
    from citegate_assets.lib.provenance.gate import check_provenance

    check_provenance(con, date(2026, 11, 1), date(2026, 11, 30))
    rows = con.sql("select citation_id, reason, verdict from provenance_results").fetchall()
    return {cid: (reason, verdict) for cid, reason, verdict in rows}


def test_every_planted_reason_end_to_end(tmp_path):
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.storage.warehouse import connect

    with connect(tmp_path / "warehouse.duckdb") as con:
        landing, config = _ingest(con, tmp_path)
        _fill_location_mismatch(con)
        got = _gate(con)
        expected = _citation_expectations()
        wrong = {
            cid: (e["expected_reason"], got.get(cid))
            for cid, e in expected.items()
            if got.get(cid, ("",))[0] != e["expected_reason"]
        }
        assert not wrong, wrong
        assert len(got) == len(expected) == 29
        assert {r for r, _ in got.values()} == {
            "ok",
            "location_mismatch",
            "context_not_found",
            "fabricated_id",
            "dropped_before_prompt",
            "span_truncated",
            "span_missing",
            "span_outside_context",
            "span_in_other_chunk",
        }
        want = {"ok": "present", "location_mismatch": "unverifiable", "context_not_found": "unverifiable"}
        for reason, verdict in got.values():
            assert verdict == want.get(reason, "absent")
        found = con.sql("select found_start from provenance_results where reason = 'location_mismatch'").fetchall()
        assert found == [(None,)] * 10
        assert con.sql("select request_id, reason from answer_rejects").fetchall() == [
            ("msg_fx_anthropic_06", "citations_not_json")
        ]
        # the app's cut: the sent part of the document is a cut prefix of the retrieved text
        assert con.sql(
            "select truncated from prompt_sections where request_id = 'msg_fx_anthropic_04' and chunk_id = 'kb-112#3'"
        ).fetchall() == [(True,)]
        # every call lands once: a rerun adds nothing
        assert ingest_landing(con, landing, config, final=True).records_ingested == 0
        assert len(_gate(con)) == 29
        assert con.execute("select count(*), count(distinct citation_id) from provenance_results").fetchone() == (
            29,
            29,
        )
        assert con.execute("select count(*) from prompts").fetchone() == (10,)


def test_without_the_location_check_the_mismatches_would_pass_or_be_misblamed(tmp_path):
    """What location_mismatch prevents: with the column empty, a shifted char range is `ok`, a document the
    logged body lacks is blamed on the model (`fabricated_id`), and text the log cut on the assembly."""
    from citegate_assets.lib.storage.warehouse import connect

    with connect(tmp_path / "warehouse.duckdb") as con:
        _ingest(con, tmp_path)
        con.execute("update citations set location_mismatch = null")
        got = {cid: reason for cid, (reason, _) in _gate(con).items()}
    assert got["msg_fx_anthropic_02#0"] == "ok"  # the text is in the document, just not where the API said
    assert got["msg_fx_anthropic_02#2"] == "fabricated_id"
    assert got["msg_fx_anthropic_04#1"] == "span_truncated"
    assert "location_mismatch" not in got.values()


def test_location_mismatch_outranks_every_other_reason(tmp_path):
    """Rows written straight into a real warehouse: a mismatch on a citation of each planted reason wins."""
    from citegate_assets.lib.storage.warehouse import connect

    with connect(tmp_path / "warehouse.duckdb") as con:
        _ingest(con, tmp_path)
        con.execute('update citations set location_mismatch = \'document 0 chars 1-2: expected "x", found "y"\'')
        got = _gate(con)
    assert set(got.values()) == {("location_mismatch", "unverifiable")} and len(got) == 29


def test_ingest_fills_location_mismatch_from_the_record(tmp_path):
    """Ingest copies each citation's `location_mismatch` from the record into citations.location_mismatch."""
    from citegate_assets.lib.storage.warehouse import connect

    with connect(tmp_path / "warehouse.duckdb") as con:
        _ingest(con, tmp_path)
        filled = con.execute("select count(*) from citations where location_mismatch is not null").fetchone()
        assert filled == (10,)
        # the API located the native citations; msg 05's are the answer's own list at citations_path
        origins = "select origin, count(*) from citations group by origin order by origin"
        assert con.execute(origins).fetchall() == [("native", 22), ("structured", 7)]
        got = {cid: reason for cid, (reason, _) in _gate(con).items()}
    assert got == {cid: e["expected_reason"] for cid, e in _citation_expectations().items()}


def test_the_exchange_file_itself_in_the_landing_folder(tmp_path):
    """Ingest detects and converts a trace file (lib/ingest/adapters/__init__.py): the recorded exchanges.jsonl dropped
    as is into the landing folder gives every planted reason."""
    from citegate_assets.lib.config import parse_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing = tmp_path / "landing"
    landing.mkdir()
    shutil.copy(EXCHANGES, landing / EXCHANGES.name)
    with connect(tmp_path / "warehouse.duckdb") as con:
        ensure_schema(con)
        config = parse_config({}, None)
        summary = ingest_landing(con, landing, config, final=True)
        assert (summary.calls_converted, summary.records_ingested, summary.answers_rejected) == (10, 10, 1)
        assert con.execute("select count(*) from ingest_rejects").fetchone() == (0,)
        got = {cid: reason for cid, (reason, _) in _gate(con).items()}
        assert got == {cid: e["expected_reason"] for cid, e in _citation_expectations().items()}
        assert ingest_landing(con, landing, config, final=True).records_ingested == 0  # no call lands twice
        assert con.execute("select count(*) from prompts").fetchone() == (10,)


def test_no_retrieval_logged_and_no_citable_block_is_retrieval_not_paired():
    """The rule of every format (base.RETRIEVAL_NOT_PAIRED): an exchange whose retrieval the app did not log, and
    whose request holds no document or search result block, is rejected, never given `retrieved: []`."""
    line = _exchange()
    line.pop("retrieved", None)
    line["request"] = {
        "model": "m",
        "max_tokens": 9,
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"[kb-112#3] {REFUNDS}\n\nRefund?"}]}],
    }
    call = _one(json.dumps(line).encode())
    assert isinstance(call, Call) and call.record is None and call.request_id == line["response"]["id"]
    assert call.reason == "retrieval_not_paired" and "no 'retrieved'" in (call.detail or "")
    line["retrieved"] = []  # logged as empty: the app says retrieval returned nothing, which is a record
    call = _one(json.dumps(line).encode())
    assert isinstance(call, Call) and call.record is not None and call.record["retrieved"] == []


def _native_line(citation: dict) -> bytes:
    """An exchange with one text document (0), one content document (1), one PDF (2) and one native citation."""
    body = {
        "model": "m",
        "max_tokens": 9,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": REFUNDS}},
                    {
                        "type": "document",
                        "source": {
                            "type": "content",
                            "content": [
                                {"type": "text", "text": GIFT[0]},
                                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                                {"type": "text", "text": GIFT[1]},
                            ],
                        },
                    },
                    {"type": "document", "source": {"type": "url", "url": "https://example.com/terms.pdf"}},
                    "q",
                ],
            }
        ],
    }
    content = [{"type": "text", "text": "It says so.", "citations": [{"cited_text": GIFT[0], **citation}]}]
    line = {
        "request": body,
        "response": {"id": "msg_y", "type": "message", "model": "m", "content": content},
        "logged_at": "2026-11-06T09:00:00Z",
    }
    return json.dumps(line).encode()


@pytest.mark.parametrize(
    ("citation", "chunk_id", "mismatch"),
    [
        (
            {"type": "content_block_location", "document_index": 1, "start_block_index": 0, "end_block_index": 1},
            "doc1",
            None,
        ),
        (
            {"type": "content_block_location", "document_index": 1, "start_block_index": 0, "end_block_index": 2},
            "doc1",
            "document 1 blocks 0-2: a cited block holds no text (an image)",
        ),
        (
            {"type": "content_block_location", "document_index": 1, "start_block_index": 2, "end_block_index": 4},
            "doc1",
            "document 1 blocks 2-4: outside the 3 blocks as logged",
        ),
        (
            {"type": "content_block_location", "document_index": 0, "start_block_index": 0, "end_block_index": 1},
            "doc0",
            "block location into document 0, whose source is 'text', not content blocks",
        ),
        (
            {"type": "char_location", "document_index": 1, "start_char_index": 0, "end_char_index": 30},
            "doc1",
            "char_location into document 1, whose source is 'content', not text",
        ),
        (
            {"type": "page_location", "document_index": 0, "start_page_number": 1, "end_page_number": 3},
            "doc0",
            "page_location into document 0, whose source is 'text', not a PDF",
        ),
        (
            {"type": "page_location", "document_index": 2, "start_page_number": 1, "end_page_number": 3},
            "doc2",
            "unverifiable: pages 1-2 of document 2, a 'url' source whose text citegate cannot read",
        ),
        (
            {
                "type": "search_result_location",
                "search_result_index": 0,
                "source": "kb-9",
                "start_block_index": 0,
                "end_block_index": 1,
            },
            "kb-9",
            "search_result_index 0: the request as logged has 0 search results",
        ),
        (
            {"type": "hologram_location"},
            "cited:hologram_location",
            "unverifiable: citation type 'hologram_location' is not one citegate knows",
        ),
    ],
)
def test_each_location_kind_is_checked(citation, chunk_id, mismatch):
    call = _one(_native_line(citation))
    assert isinstance(call, Call) and call.record is not None, call
    [cit] = call.record["citations"]
    assert (cit["chunk_id"], cit["location_mismatch"]) == (chunk_id, mismatch)
    assert cit["span"] == GIFT[0] and cit["claim"] == "It says so."
    # the URL PDF is not retrieved text: left out, rank 3 skipped
    assert [(r["chunk_id"], r["rank"]) for r in call.record["retrieved"]] == [("doc0", 1), ("doc1", 2)]


def test_page_location_into_a_pdf_is_checked_against_the_pages_pypdf_reads():
    """Line 9: a two-page PDF made with fpdf2. Its pages' text is the document's text in the prompt and in
    `retrieved`; a page_location holds when its cited text is on the cited pages (line wraps aside), and its span
    is then the pages' own text."""
    from citegate_assets.lib.ingest.containers import decode_body

    call = _calls()[8]
    assert call.request_id == "msg_fx_anthropic_09" and call.record is not None
    rec = call.record
    [pdf] = [r for r in rec["retrieved"] if r["chunk_id"] == "card-terms.pdf"]
    assert "no fee is\ncharged for refunds to the original card" in pdf["text"]  # wrapped where the PDF wraps
    assert "frozen until the dispute is closed" in pdf["text"]
    [document] = [m for m in decode_body(rec["prompt"], "json").messages if m.role == "document" and m.block.index == 0]
    assert document.text == pdf["text"]  # the PDF's text is part of the prompt as decoded
    cits = rec["citations"]
    assert [c["location_mismatch"] for c in cits[:2]] == [None, None]
    assert cits[0]["span"] in pdf["text"] and "\n" in cits[0]["span"]  # the PDF's own line break, kept
    assert "which is on page 2" in cits[2]["location_mismatch"]
    assert "not in the PDF's text" in cits[3]["location_mismatch"]
    assert not any(c["location_mismatch"].startswith("unverifiable") for c in cits[2:])


def test_an_encrypted_or_oversized_pdf_is_unverifiable_never_a_pass(monkeypatch):
    from citegate_assets.lib.ingest import pdf_text

    locked = _calls()[9]
    assert locked.request_id == "msg_fx_anthropic_10" and locked.record is not None
    [cit] = locked.record["citations"]
    assert cit["location_mismatch"] == (
        "unverifiable: page 1 of document 0, a PDF citegate cannot read: the PDF is encrypted"
    )
    assert "card-terms-locked.pdf" not in {r["chunk_id"] for r in locked.record["retrieved"]}
    monkeypatch.setattr(pdf_text, "MAX_PDF_PAGES", 1)
    pdf_text._READ.clear()
    over = _calls()[8]
    assert over.record is not None
    assert {c["location_mismatch"] for c in over.record["citations"]} == {
        "unverifiable: page 1 of document 0, a PDF citegate cannot read: the PDF has 2 pages, over the 1 read",
        "unverifiable: page 2 of document 0, a PDF citegate cannot read: the PDF has 2 pages, over the 1 read",
    }
    pdf_text._READ.clear()
