"""The OTLP adapter on the fixtures the real OpenTelemetry SDK and opentelemetry-instrumentation-openai-v2
wrote (scripts/record_otlp_fixtures.py): records, rejects, the pairing rule, both message modes, and every planted
provenance reason through the guard and through the nightly ingest + provenance SQL."""

from __future__ import annotations

import copy
import json
import shutil
from collections import Counter
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets.guard import check_citations
from citegate_assets.lib.ingest.adapters.base import AdapterSettings, Call, LineReject
from citegate_assets.lib.ingest.adapters.otlp import ADAPTER, OtlpAdapter
from citegate_assets.lib.ingest.adapters.traces import LLM, OTHER, RETRIEVER, Span, SpanTree, pair
from citegate_assets.lib.ingest.records import Record, parse_record

FIXTURES = Path(__file__).parent / "fixtures" / "adapters" / "otlp"
FILES = ("otlp_attributes.jsonl", "otlp_events.jsonl")
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


def _expected() -> list[dict]:
    return [json.loads(x) for x in (FIXTURES / "expected.jsonl").read_text(encoding="utf-8").splitlines()]


def _lines(name: str) -> list[tuple[int, bytes]]:
    return list(enumerate((FIXTURES / name).read_bytes().splitlines(), 1))


def _convert(lines: list[tuple[int, bytes]], settings: AdapterSettings | None = None) -> list[Call | LineReject]:
    return list(OtlpAdapter().convert(iter(lines), settings or AdapterSettings()))


def _records(name: str, settings: AdapterSettings | None = None) -> dict[str, dict]:
    return {
        i.request_id: i.record
        for i in _convert(_lines(name), settings)
        if isinstance(i, Call) and i.record and i.request_id
    }


def _rid(question_part: str, name: str = "otlp_attributes.jsonl") -> str:
    """The request id of the planted call whose prompt holds `question_part`."""
    hits = [rid for rid, rec in _records(name).items() if question_part in rec["prompt"]]
    assert len(hits) == 1, hits
    return hits[0]


def test_detect_claims_otlp_json_lines_only():
    for name in FILES:
        assert ADAPTER.detect(_lines(name)[0][1])
    assert ADAPTER.detect(b'{"resourceLogs": []}')
    assert not ADAPTER.detect(b'{"request_id": "r1", "prompt": "p"}')  # citegate-log/1
    assert not ADAPTER.detect(b'{"context": {"trace_id": "7f3a", "span_id": "c2"}, "span_kind": "LLM"}')
    assert not ADAPTER.detect(b"not json")
    assert not ADAPTER.detect(b'{"resourceSpans": "x"}')


def test_the_registry_detects_otlp_files():
    from citegate_assets.lib.ingest.adapters import adapter, detect

    assert adapter("otlp").name == "otlp"
    for name in FILES:
        found = detect(_lines(name)[0][1])
        assert found is not None and found.name == "otlp"


def test_every_call_and_bad_line_lands_once_with_its_expected_outcome():
    expected = _expected()
    for name in FILES:
        items = _convert(_lines(name))
        assert [i.line_no for i in items] == sorted(i.line_no for i in items)  # source order
        calls = [i for i in items if isinstance(i, Call)]
        assert len({c.request_id for c in calls}) == len(calls)
        want_calls = {e["request_id"]: e for e in expected if e["file"] == name and e["request_id"]}
        assert {c.request_id for c in calls} == set(want_calls)
        for c in calls:
            e = want_calls[c.request_id]
            assert c.line_no == e["line_no"], c
            if e["position"] is None and e["expected_reason"] != "citations_not_json":
                assert (c.record, c.reason) == (None, e["expected_reason"]), c
                assert c.detail and c.request_id and f"span {c.request_id.split('/')[1]}" in c.detail
            else:
                assert c.reason is None and c.record is not None, c
                retrieved = c.record["retrieved"]
                assert [r["chunk_id"] for r in retrieved] == e["retrieved"]
                assert [r["rank"] for r in retrieved] == list(range(1, len(retrieved) + 1))
                from_prompt = [r["chunk_id"] for r in retrieved if r.get("text_source") == "prompt"]
                assert from_prompt == e.get("text_from_prompt", [])
                assert [x["chunk_id"] for x in c.record.get("retrieved_left_out", [])] == e.get("left_out", [])
                assert c.record["surface"] == e.get("surface", c.record["surface"])
        line_rejects = {(i.line_no, i.reason) for i in items if isinstance(i, LineReject)}
        assert line_rejects == {
            (e["line_no"], e["expected_reason"]) for e in expected if e["file"] == name and e["request_id"] is None
        }
    counts = Counter(e["expected_reason"] for e in expected if e["position"] is None)
    assert counts == {
        "content_not_captured": 2,
        "content_redacted": 1,
        "content_truncated": 1,
        "citations_not_json": 1,
        "invalid_json": 1,
        "not_of_format": 1,
    }


def test_records_are_valid_citegate_log_records():
    for name in FILES:
        for rid, rec in _records(name).items():
            parsed = parse_record(rec, NOW)
            assert isinstance(parsed, Record), (rid, parsed)
            trace_id, span_id = rid.split("/")
            assert len(trace_id) == 32 and len(span_id) == 16 and trace_id.startswith("c17e6a7e")
            assert parsed.prompt_encoding == "json" and rec["prompt_reconstructed"] is True
            assert parsed.answer_model == "gpt-4.1-2025-04-14"  # gen_ai.response.model over request.model
            body = json.loads(rec["prompt"])
            assert body["model"] == "gpt-4.1" and [m["role"] for m in body["messages"]] == ["system", "user"]
            assert rec["logged_at"].endswith("Z") and parsed.logged_at.tzinfo is not None


def test_logged_at_is_the_span_start_in_utc():
    line, chat, _ = _first_line_spans()
    rec = _records("otlp_attributes.jsonl")[f"{chat['traceId']}/{chat['spanId']}"]
    start = int(chat["startTimeUnixNano"])
    assert rec["logged_at"] == "2026-11-16T09:00:00.004000Z"
    assert datetime.fromisoformat(rec["logged_at"]).timestamp() == start / 1e9


def test_surface_span_attribute_then_resource_attribute_then_service_name_then_default():
    recs = _records("otlp_attributes.jsonl")
    assert recs[_rid("Can I pay with store credit?")]["surface"] == "help-center-mobile"  # span attribute
    assert recs[_rid("How long do card refunds take")]["surface"] == "help-center"  # service.name
    events = _records("otlp_events.jsonl")
    assert [r["surface"] for r in events.values()] == ["help-center-legacy"]  # resource attribute `surface`
    assert {r["surface"] for r in _records("otlp_attributes.jsonl", AdapterSettings(surface_key="x")).values()} == {
        "help-center"
    }
    # a resource whose service.name is the SDK default names no surface
    line = json.loads(_lines("otlp_attributes.jsonl")[0][1])
    for kv in line["resourceSpans"][0]["resource"]["attributes"]:
        if kv["key"] == "service.name":
            kv["value"] = {"stringValue": "unknown_service:python"}
    items = _convert([(1, json.dumps(line).encode())], AdapterSettings(default_surface="web"))
    assert [i.record["surface"] for i in items if isinstance(i, Call) and i.record] == ["web"]


def test_every_planted_reason_through_the_guard():
    # the guard is given the chunks with text: one the trace named by id only (retrieved_left_out) is the gate's
    expected = [
        e
        for e in _expected()
        if e["position"] is not None and e["file"] in FILES and e["chunk_id"] not in e.get("left_out", [])
    ]
    per_file = {name: Counter(e["expected_reason"] for e in expected if e["file"] == name) for name in FILES}
    assert set(per_file["otlp_attributes.jsonl"]) == REASONS
    assert set(per_file["otlp_events.jsonl"]) == REASONS
    records = {rid: rec for name in FILES for rid, rec in _records(name).items()}
    wrong = []
    for rid in {e["request_id"] for e in expected}:
        rec = records[rid]
        report = check_citations(rec["prompt"], rec["retrieved"], rec["citations"], encoding="json")
        want = {e["position"]: e["expected_reason"] for e in expected if e["request_id"] == rid}
        got = {i: c.reason for i, c in enumerate(report.citations) if i in want}
        if got != want:
            wrong.append((rid, got, want))
    assert not wrong


def test_every_planted_reason_through_ingest_and_the_provenance_gate(tmp_path):
    from citegate_assets.lib.config import parse_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.provenance.gate import check_provenance
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing = tmp_path / "landing"
    landing.mkdir()
    for name in FILES:
        shutil.copy(FIXTURES / name, landing / name)
    config = parse_config({}, None)
    expected = _expected()
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        first = ingest_landing(con, landing, config, final=True, now=NOW)
        assert first.trace_files == 2
        check_provenance(con, date(2026, 11, 1), date(2026, 11, 30), now=NOW)
        got = dict(con.sql("select citation_id, reason from provenance_results").fetchall())
        want = {
            f"{e['request_id']}#{e['position']}": e["expected_reason"]
            for e in expected
            if e["position"] is not None and e["file"] in FILES
        }
        assert got == want
        rejects = Counter(r for (r,) in con.sql("select reason from ingest_rejects").fetchall())
        assert rejects == {
            "content_not_captured": 2,
            "content_redacted": 1,
            "content_truncated": 1,
            "invalid_json": 1,
            "not_of_format": 1,
        }
        assert [r for (r,) in con.sql("select reason from answer_rejects").fetchall()] == ["citations_not_json"]
        assert con.execute("select bool_and(prompt_reconstructed), count(*) from prompts").fetchall() == [(True, 7)]
        # a text taken from the prompt, and a chunk the trace named without a text, say so in the tables
        from_prompt = {(e["request_id"], c) for e in expected for c in e.get("text_from_prompt", [])}
        taken = con.sql("select request_id, chunk_id from retrievals where text_source = 'prompt'").fetchall()
        assert from_prompt and set(taken) == from_prompt
        left_out = {(e["request_id"], tuple(e["left_out"])) for e in expected if e.get("left_out")}
        stored = con.sql("select request_id, retrieved_left_out from prompts where retrieved_left_out is not null")
        assert {(rid, tuple(x["chunk_id"] for x in json.loads(v))) for rid, v in stored.fetchall()} == left_out
        again = ingest_landing(con, landing, config, final=True, now=NOW)  # rerun: nothing twice
        assert again.records_ingested == 0 and again.records_rejected == 0
        assert con.execute("select count(*) from prompts").fetchall() == [(7,)]


def test_pairing_inner_retriever_first_late_one_not_paired_duplicates_keep_first_rank():
    rec = _records("otlp_attributes.jsonl")[_rid("Do damaged items get replaced")]
    assert [(r["chunk_id"], r["rank"]) for r in rec["retrieved"]] == [("kb-520#2", 1), ("kb-633#1", 2), ("kb-415#4", 3)]
    # kb-087#1 came only from a retriever that ended after the call started
    assert "kb-087#1" not in {r["chunk_id"] for r in rec["retrieved"]}


def test_retrieved_with_text_in_document_order():
    rec = _records("otlp_attributes.jsonl")[_rid("How long do card refunds take")]
    assert [(r["chunk_id"], r["rank"]) for r in rec["retrieved"]] == [
        ("kb-112#3", 1),
        ("kb-087#1", 2),
        ("kb-204#2", 3),
        ("kb-310#1", 4),
    ]
    assert all("text_source" not in r for r in rec["retrieved"])
    assert rec["retrieved"][2]["text"].endswith("items marked final sale cannot be exchanged at all.")
    assert rec["citations"][0] == {
        "chunk_id": "kb-112#3",
        "span": "issued within 5 business days of approval",
        "claim": "Card refunds take 5 business days.",
    }


def test_documents_without_text_take_it_from_the_prompt_or_are_left_out():
    rec = _records("otlp_attributes.jsonl")[_rid("When can I chat with support?")]
    assert [(r["chunk_id"], r["rank"], r["text_source"]) for r in rec["retrieved"]] == [
        ("kb-633#1", 1, "prompt"),
        ("kb-087#1", 2, "prompt"),
        ("kb-112#3", 3, "prompt"),
    ]
    assert rec["retrieved"][0]["text"] == "Customer support answers chat messages from 8:00 to 20:00 CET on weekdays."
    # the app cut kb-112#3 to 110 characters: the prompt's text is the cut one
    assert rec["retrieved"][2]["text"] == (
        "Refunds to the original card are issued within 5 business days of approval. Bank processing can add up to 3 fu"
    )
    assert rec["retrieved_left_out"] == [
        {"chunk_id": "kb-415#4", "why": "no text in the trace, and its id opens no line of the prompt"}
    ]


def test_both_message_modes_give_the_same_call():
    attrs = _records("otlp_attributes.jsonl")[_rid("How long do card refunds take")]
    events = next(iter(_records("otlp_events.jsonl").values()))
    a, e = json.loads(attrs["prompt"]), json.loads(events["prompt"])
    assert a["messages"][0] == e["messages"][0]  # the system message with the sources
    assert a["messages"][1]["content"].replace("current conventions", "older events") == e["messages"][1]["content"]
    assert attrs["retrieved"] == events["retrieved"] and attrs["citations"] == events["citations"]
    assert attrs["answer"] == events["answer"]


def test_content_in_the_operation_details_event_only():
    """Current conventions with capture mode event_only: no content on the span, the same attributes on a
    gen_ai.client.inference.operation.details log record (structured, not JSON strings)."""
    raw = _lines("otlp_attributes.jsonl")
    rid = _rid("content in events only")
    trace_id, span_id = rid.split("/")
    span_line = next(json.loads(b) for _, b in raw if span_id.encode() in b and b"resourceSpans" in b)
    chat = next(
        s for rs in span_line["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"] if s["spanId"] == span_id
    )
    assert not {kv["key"] for kv in chat["attributes"]} & {"gen_ai.input.messages", "gen_ai.output.messages"}
    rec = _records("otlp_attributes.jsonl")[rid]
    assert [m["role"] for m in json.loads(rec["prompt"])["messages"]] == ["system", "user"]
    assert rec["citations"][0]["span"] == "never expires"


def test_events_may_come_before_their_span():
    lines = _lines("otlp_events.jsonl")
    reordered = [(no, raw) for no, raw in sorted(lines, key=lambda x: -x[0])]
    assert {i.request_id: i.record for i in _convert(reordered) if isinstance(i, Call)} == {
        i.request_id: i.record for i in _convert(lines) if isinstance(i, Call)
    }


def test_citations_path_and_a_non_json_answer():
    rid = _rid("How long do card refunds take")
    assert isinstance(_records("otlp_attributes.jsonl")[rid]["citations"], list)
    missing = _records("otlp_attributes.jsonl", AdapterSettings(citations_path="result.citations"))[rid]
    assert missing["citations"] == missing["answer"]  # raw text: answer_rejects downstream (citations_not_list)
    raw = _records("otlp_attributes.jsonl")[_rid("Is my refund late?")]
    assert raw["citations"] == raw["answer"] == "Your refund should arrive soon [kb-112#3]."


# --- content a tracer changed, on copies of real lines -----------------------------------------------------------


def _first_line_spans() -> tuple[dict, dict, dict]:
    line = json.loads(_lines("otlp_attributes.jsonl")[0][1])
    spans = [s for ss in line["resourceSpans"][0]["scopeSpans"] for s in ss["spans"]]
    chat = next(s for s in spans if s["name"].startswith("chat"))
    retrieval = next(s for s in spans if s["name"].startswith("retrieval"))
    return line, chat, retrieval


def _set(span: dict, key: str, value: dict | None) -> None:
    span["attributes"] = [kv for kv in span["attributes"] if kv["key"] != key]
    if value is not None:
        span["attributes"].append({"key": key, "value": value})


def _one_call(line: dict) -> Call:
    (item,) = _convert([(1, json.dumps(line).encode())])
    assert isinstance(item, Call)
    return item


def _get(span: dict, key: str) -> str:
    return next(kv["value"]["stringValue"] for kv in span["attributes"] if kv["key"] == key)


@pytest.mark.parametrize(
    "change,reason,words",
    [
        ("docs_cut", "content_truncated", "retrieval span"),
        ("docs_removed", "content_not_captured", "gen_ai.retrieval.documents"),
        ("docs_redacted", "content_redacted", "redaction.redacted.keys"),
        ("placeholder", "content_redacted", "__REDACTED__"),
        ("output_cut", "content_truncated", "gen_ai.output.messages"),
        ("input_garbled", "not_of_format", "not JSON"),
        ("no_model", "not_of_format", "gen_ai.request.model"),
    ],
)
def test_changed_content_gives_its_reason(change, reason, words):
    line, chat, retrieval = _first_line_spans()
    if change == "docs_cut":
        _set(
            retrieval, "gen_ai.retrieval.documents", {"stringValue": _get(retrieval, "gen_ai.retrieval.documents")[:90]}
        )
    elif change == "docs_removed":
        _set(retrieval, "gen_ai.retrieval.documents", None)
    elif change == "docs_redacted":
        _set(retrieval, "redaction.redacted.keys", {"stringValue": "gen_ai.retrieval.documents,db.query"})
    elif change == "placeholder":
        msgs = json.loads(_get(chat, "gen_ai.input.messages"))
        msgs[1]["parts"][0]["content"] = "__REDACTED__"
        _set(chat, "gen_ai.input.messages", {"stringValue": json.dumps(msgs)})
    elif change == "output_cut":
        _set(chat, "gen_ai.output.messages", {"stringValue": _get(chat, "gen_ai.output.messages")[:-5]})
    elif change == "input_garbled":
        _set(chat, "gen_ai.input.messages", {"stringValue": "[{] not json at all"})
    elif change == "no_model":
        _set(chat, "gen_ai.request.model", None)
        _set(chat, "gen_ai.response.model", None)
    call = _one_call(line)
    assert (call.record, call.reason) == (None, reason)
    assert call.detail and words in call.detail


def test_structured_messages_and_system_instructions_are_read_too():
    line, chat, _ = _first_line_spans()
    msgs = json.loads(_get(chat, "gen_ai.input.messages"))
    system, user = msgs
    _set(chat, "gen_ai.system_instructions", {"stringValue": json.dumps(system["parts"])})
    _set(chat, "gen_ai.input.messages", {"arrayValue": {"values": [_any(user)]}})
    before = _records("otlp_attributes.jsonl")[_rid("How long do card refunds take")]
    call = _one_call(line)
    assert call.record is not None
    assert json.loads(call.record["prompt"]) == json.loads(before["prompt"])


def _any(value: object) -> dict:
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    assert isinstance(value, dict)
    return {"kvlistValue": {"values": [{"key": k, "value": _any(v)} for k, v in value.items()]}}


def test_failed_retriever_is_skipped_and_a_chunk_id_can_come_from_metadata():
    line, chat, retrieval = _first_line_spans()
    docs = json.loads(_get(retrieval, "gen_ai.retrieval.documents"))
    for d in docs:
        d["metadata"] = {"cid": d.pop("id")}
    _set(retrieval, "gen_ai.retrieval.documents", {"stringValue": json.dumps(docs)})
    (item,) = [i for i in _convert([(1, json.dumps(line).encode())], AdapterSettings(chunk_id_key="cid"))]
    assert isinstance(item, Call) and item.record is not None
    assert [r["chunk_id"] for r in item.record["retrieved"]] == ["kb-112#3", "kb-087#1", "kb-204#2", "kb-310#1"]
    no_key = _one_call(line)
    assert no_key.reason == "not_of_format" and "metadata.chunk_id" in (no_key.detail or "")
    failed = copy.deepcopy(line)
    for ss in failed["resourceSpans"][0]["scopeSpans"]:
        for s in ss["spans"]:
            if s["name"].startswith("retrieval"):
                s["status"] = {"code": 2, "message": "timeout"}
    call = _one_call(failed)
    assert call.record is not None and call.record["retrieved"] == []


@pytest.mark.parametrize("untraced", ["removed", "ended_after_the_call_started"])
def test_a_call_with_no_retriever_paired_is_rejected_never_given_an_empty_retrieval(untraced):
    """The rule of every format (base.RETRIEVAL_NOT_PAIRED): `retrieved: []` would make each citation of a RAG call
    whose retriever was not traced a false fabricated_id."""
    line, chat, retrieval = _first_line_spans()
    for ss in line["resourceSpans"][0]["scopeSpans"]:
        if untraced == "removed":
            ss["spans"] = [s for s in ss["spans"] if not s["name"].startswith("retrieval")]
        else:
            for s in ss["spans"]:
                if s["name"].startswith("retrieval"):
                    s["endTimeUnixNano"] = str(int(chat["startTimeUnixNano"]) + 1)
    call = _one_call(line)
    assert (call.record, call.reason) == (None, "retrieval_not_paired")
    assert call.request_id == f"{chat['traceId']}/{chat['spanId']}"
    assert call.detail and chat["spanId"] in call.detail and chat["traceId"] in call.detail


@pytest.mark.parametrize(
    "raw,reason",
    [
        (b"", "empty_line"),
        (b"\xff\xfe{}", "invalid_utf8"),
        (b'{"resourceSpans": [', "invalid_json"),
        (b"[1, 2]", "not_of_format"),
        (b'{"spans": []}', "not_of_format"),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "00000000000000000000000000000000"}]}]}]}',
            "not_of_format",
        ),
        (
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "5b8efff798038103d269b633813fc60c", '
            b'"spanId": "eee19b7ec3c1b174", "startTimeUnixNano": 17.5}]}]}]}',
            "not_of_format",
        ),
        (b'{"resourceSpans": [{"scopeSpans": {"spans": []}}]}', "not_of_format"),
    ],
)
def test_bad_lines_are_rejected_with_a_reason_naming_the_field(raw, reason):
    (item,) = _convert([(3, raw)])
    assert isinstance(item, LineReject) and (item.line_no, item.reason) == (3, reason) and item.detail


def test_a_line_of_spans_without_calls_yields_nothing():
    line, chat, _ = _first_line_spans()
    for ss in line["resourceSpans"][0]["scopeSpans"]:
        ss["spans"] = [s for s in ss["spans"] if s is not chat and s["spanId"] != chat["spanId"]]
    assert _convert([(1, json.dumps(line).encode())]) == []


# --- the shared pairing helper -----------------------------------------------------------------------------------


def _s(span_id: str, parent: str | None, start: int, end: int | None, kind: str = OTHER, trace: str = "t") -> Span:
    return Span(trace, span_id, parent, start, end, kind)


def test_pair_ended_before_the_call_started_nearest_ancestor_then_nearest_in_time():
    spans = [
        _s("root", None, 0, 100),
        _s("outer", "root", 1, 5, RETRIEVER),  # under the grandparent: distance 2
        _s("wf", "root", 6, 90),
        _s("early", "wf", 7, 9, RETRIEVER),  # sibling, ended first
        _s("late", "wf", 10, 12, RETRIEVER),  # sibling, ended last: nearest in time
        _s("nested", "step", 13, 14, RETRIEVER),  # under a sibling span: its common ancestor is wf, distance 1
        _s("step", "wf", 13, 15),
        _s("running", "wf", 15, 40, RETRIEVER),  # still running when the call started
        _s("open", "wf", 15, None, RETRIEVER),  # no end time
        _s("orphan", "gone", 2, 3, RETRIEVER),  # its parent is not in the file
        _s("other", "root", 1, 2, RETRIEVER, trace="u"),  # another trace
        _s("call", "wf", 20, 30, LLM),
        _s("after", "wf", 31, 32, RETRIEVER),
    ]
    assert [s.span_id for s in pair(spans, spans[-2])] == ["nested", "late", "early", "outer", "orphan"]
    tree = SpanTree(spans)
    assert tree.ancestors(spans[-2]) == ["wf", "root"]
    root_call = _s("rootcall", None, 50, 60, LLM)  # no ancestor: every finished retriever of the trace, by time
    assert [s.span_id for s in tree.pair(root_call)] == [
        "running",
        "after",
        "nested",
        "late",
        "early",
        "outer",
        "orphan",
    ]


def test_pair_a_root_call_has_no_ancestor_so_every_retriever_of_the_trace_comes_by_time():
    spans = [_s("a", "x", 1, 3, RETRIEVER), _s("b", None, 2, 5, RETRIEVER), _s("c", "b", 3, 4, RETRIEVER)]
    assert [s.span_id for s in pair(spans, _s("call", None, 10, 11, LLM))] == ["b", "c", "a"]


def test_pair_survives_a_parent_cycle():
    spans = [_s("a", "b", 0, 1), _s("b", "a", 0, 1), _s("r", "a", 1, 2, RETRIEVER), _s("call", "a", 3, 4, LLM)]
    assert [s.span_id for s in pair(spans, spans[-1])] == ["r"]


def test_the_surface_comes_from_the_nearest_ancestor_span_that_names_one():
    """An app sets `app.surface` on the request's root span, not on the model call's span: it is read there
    (the resource's service.name, help-center, comes after)."""
    line = json.loads(_lines("otlp_attributes.jsonl")[0][1])
    rid = _rid("How long do card refunds take")
    for rs in line["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                if sp["name"] == "answer_question" and sp["traceId"] == rid.split("/")[0]:
                    sp.setdefault("attributes", []).append({"key": "app.surface", "value": {"stringValue": "web"}})
    items = _convert([(1, json.dumps(line).encode())], AdapterSettings(surface_key="app.surface"))
    records = {i.request_id: i.record for i in items if isinstance(i, Call) and i.record}
    assert records[rid]["surface"] == "web"
    # the default key `surface` reads a namespaced `app.surface` too; another key leaves it to the resource's
    plain = _convert([(1, json.dumps(line).encode())], AdapterSettings())
    assert {i.request_id: i.record["surface"] for i in plain if isinstance(i, Call) and i.record}[rid] == "web"
    other = _convert([(1, json.dumps(line).encode())], AdapterSettings(surface_key="product"))
    assert {i.request_id: i.record["surface"] for i in other if isinstance(i, Call) and i.record}[rid] == "help-center"
