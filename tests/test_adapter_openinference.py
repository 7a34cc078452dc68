"""OpenInference spans exported from Phoenix: the adapter on the spans the real instrumentors wrote
(scripts/record_openinference_fixtures.py; tests/fixtures/adapters/openinference/)."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

from citegate_assets.lib.ingest.adapters.base import AdapterSettings, Call, LineReject
from citegate_assets.lib.ingest.adapters.openinference import ADAPTER, _Trace, pair_retrievers, parse_span
from citegate_assets.lib.ingest.records import Record, parse_record

FIXTURES = Path(__file__).parent / "fixtures" / "adapters" / "openinference"
SPANS = FIXTURES / "phoenix_spans.jsonl"
FRAME = FIXTURES / "phoenix_spans_dataframe.jsonl"
NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)
PLANTED_REJECTS = {"content_redacted", "content_truncated"}
REASONS = {
    "ok",
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
    "location_mismatch",  # an Anthropic native citation whose cited text is not at its location
}


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _convert(lines: list[bytes], settings: AdapterSettings | None = None) -> list[Call | LineReject]:
    return list(ADAPTER.convert(enumerate(lines, 1), settings or AdapterSettings()))


def _calls(items: list[Call | LineReject]) -> dict[str, Call]:
    return {c.request_id: c for c in items if isinstance(c, Call) and c.request_id is not None}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _edit(lines: list[bytes], pick, change) -> list[bytes]:
    """The fixture with the first span for which pick(span) holds changed by change(span) (in place)."""
    out, done = [], False
    for raw in lines:
        try:
            obj = json.loads(raw)
        except ValueError:
            out.append(raw)
            continue
        if not done and pick(obj):
            change(obj)
            done = True
        out.append(json.dumps(obj).encode())
    assert done
    return out


def _llm_of(scenario: str):
    return lambda s: s.get("span_kind") == "LLM" and s["attributes"].get("metadata.scenario") == scenario


def test_detects_its_format_and_no_other():
    assert ADAPTER.name == "openinference"
    assert ADAPTER.detect(_lines(SPANS)[0]) and ADAPTER.detect(_lines(FRAME)[0])
    citegate_line = b'{"request_id": "r1", "logged_at": "2026-11-02T09:00:00Z", "surface": "s", "prompt": "p"}'
    otlp_line = b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "5b8e", "spanId": "eee1"}]}]}]}'
    for line in (citegate_line, otlp_line, b"not json", b"[1, 2]", b"\xff\xfe"):
        assert not ADAPTER.detect(line)


def test_every_llm_span_is_one_call_with_its_planted_outcome():
    items = _convert(_lines(SPANS))
    assert [i.line_no for i in items] == sorted(i.line_no for i in items)  # source order
    [bad] = [i for i in items if isinstance(i, LineReject)]
    assert (bad.line_no, bad.reason) == (2, "invalid_json")
    calls = _calls(items)
    expected = _jsonl(FIXTURES / "calls.jsonl")
    assert len(calls) == len(expected) == sum(isinstance(i, Call) for i in items) == 8
    for want in expected:
        call = calls[want["request_id"]]
        assert call.reason == want["reason"], (want["scenario"], call.detail)
        if want["reason"]:
            assert call.record is None and call.detail and want["request_id"] in call.detail
            continue
        rec = call.record
        assert rec is not None
        assert rec["request_id"] == want["request_id"] and rec["surface"] == want["surface"]
        assert [r["chunk_id"] for r in rec["retrieved"]] == want["retrieved"]
        assert [r["rank"] for r in rec["retrieved"]] == list(range(1, len(want["retrieved"]) + 1))
        assert rec["prompt_encoding"] == "json" and rec["prompt_reconstructed"] is True
        parsed = parse_record(rec, NOW)  # a valid citegate-log/1 record, citations included
        assert isinstance(parsed, Record), parsed
        assert parsed.answer_reject is None and parsed.citations
        assert parsed.logged_at.date() == date(2026, 11, 2)


def test_redacted_and_cut_calls_are_rejected_with_their_own_reason():
    calls = {c.reason: c for c in _convert(_lines(SPANS)) if isinstance(c, Call) and c.reason}
    assert set(calls) == {"content_redacted", "content_truncated"}
    assert "OPENINFERENCE_HIDE_INPUTS" in (calls["content_redacted"].detail or "")
    assert "mid-JSON" in (calls["content_truncated"].detail or "")


def test_openai_input_value_is_the_prompt_verbatim_and_messages_rebuild_the_llama_index_call():
    spans = {s.span_id: s for raw in _lines(SPANS) if not isinstance(s := parse_span(0, raw), LineReject)}
    calls = _calls(_convert(_lines(SPANS)))
    by_scenario = {spans[rid].attrs["metadata.scenario"]: c.record for rid, c in calls.items() if c.record}
    refund = by_scenario["refund-timing"]
    assert refund is not None
    refund_span = next(s for s in spans.values() if s.kind == "LLM" and s.attrs["metadata.scenario"] == "refund-timing")
    assert refund["prompt"] == refund_span.attrs["input.value"]  # the SDK's request parameters, as logged
    assert refund["answer_model"] == "gpt-4.1-mini-2025-04-14"  # llm.model_name: the response's model
    llama = by_scenario["exchange-sizes"]
    assert llama is not None and llama["answer_model"] == "llama-3.1-8b-instruct"
    body = json.loads(llama["prompt"])  # input.value held llama-index's arguments: rebuilt from llm.input_messages
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("Answer from the sources only.")
    assert "(source: kb-201#2) Exchanges for a different size" in body["messages"][0]["content"]
    assert body["messages"][1]["content"] == "Do size exchanges cost anything?"
    assert json.loads(llama["answer"])["citations"] == llama["citations"]


def test_anthropic_native_citations_are_verified_against_input_value():
    spans = {s.span_id: s for raw in _lines(SPANS) if not isinstance(s := parse_span(0, raw), LineReject)}
    [call] = [
        c
        for c in _calls(_convert(_lines(SPANS))).values()
        if c.request_id and c.record and spans[c.request_id].attrs["metadata.scenario"] == "native-citations"
    ]
    rec = call.record
    assert rec is not None and rec["answer_model"] == "claude-sonnet-4-6"
    assert json.loads(rec["prompt"])["messages"][0]["content"][0]["type"] == "search_result"
    # retrieved: the paired retriever's three chunks (the app sent two), not the request's blocks
    assert [r["chunk_id"] for r in rec["retrieved"]] == ["kb-112#3", "kb-087#1", "kb-415#2"]
    ok, moved = rec["citations"]
    assert (ok["chunk_id"], ok["location_mismatch"]) == ("kb-112#3", None)
    assert ok["claim"] == "Claim citing kb-112#3." and ok["span"].startswith("Refunds to the original card")
    assert moved["chunk_id"] == "kb-087#1" and "search result 1" in moved["location_mismatch"]


def _without_retrievers(lines: list[bytes], scenario: str) -> tuple[list[bytes], str]:
    """The fixture with the RETRIEVER spans of the scenario's trace left out (a retriever that was not traced),
    and the request id of its model call."""
    spans = [s for raw in lines if not isinstance(s := parse_span(0, raw), LineReject)]

    def scenario_of(span) -> object:  # flattened (span list) or an object (dataframe)
        return span.attrs.get("metadata.scenario") or (span.attrs.get("metadata") or {}).get("scenario")

    [call] = [s for s in spans if s.kind == "LLM" and scenario_of(s) == scenario]
    drop = {s.span_id for s in spans if s.trace_id == call.trace_id and s.kind == "RETRIEVER"}
    assert drop
    kept = [raw for raw in lines if isinstance(s := parse_span(0, raw), LineReject) or s.span_id not in drop]
    return kept, call.span_id


def test_a_call_with_no_retriever_paired_is_rejected_never_given_an_empty_retrieval():
    """The rule of every format (base.RETRIEVAL_NOT_PAIRED): `retrieved: []` would make each citation of a RAG call
    whose retriever was not traced a false fabricated_id."""
    for path in (SPANS, FRAME):
        lines, request_id = _without_retrievers(_lines(path), "refund-timing")
        call = _calls(_convert(lines))[request_id]
        assert (call.record, call.reason) == (None, "retrieval_not_paired")
        assert call.detail and request_id in call.detail
        before = {rid: c.reason for rid, c in _calls(_convert(_lines(path))).items()}
        after = {rid: c.reason for rid, c in _calls(_convert(lines)).items()}
        assert before[request_id] is None and after == before | {request_id: "retrieval_not_paired"}


def test_with_no_retriever_paired_an_anthropic_requests_own_blocks_are_the_retrieval():
    """The exception to retrieval_not_paired: the request carries the citable blocks (search results here)."""
    lines, request_id = _without_retrievers(_lines(SPANS), "native-citations")
    rec = _calls(_convert(lines))[request_id].record
    assert rec is not None
    blocks = [b for b in json.loads(rec["prompt"])["messages"][0]["content"] if b["type"] == "search_result"]
    assert [r["chunk_id"] for r in rec["retrieved"]] == [b["source"] for b in blocks] == ["kb-112#3", "kb-087#1"]
    assert [r["rank"] for r in rec["retrieved"]] == [1, 2]
    assert [c["chunk_id"] for c in rec["citations"]] == ["kb-112#3", "kb-087#1"]

    def no_native_citations(span: dict) -> None:  # the same request, cited in the answer's JSON instead
        message = json.loads(span["attributes"]["output.value"])
        message["content"] = [{"type": "text", "text": json.dumps({"citations": [{"chunk_id": "kb-087#1"}]})}]
        span["attributes"]["output.value"] = json.dumps(message)

    edited = _edit(lines, lambda s: s.get("context", {}).get("span_id") == request_id, no_native_citations)
    rec = _calls(_convert(edited))[request_id].record
    assert rec is not None and [r["chunk_id"] for r in rec["retrieved"]] == ["kb-112#3", "kb-087#1"]
    assert rec["citations"] == [{"chunk_id": "kb-087#1"}]


def test_a_framework_llm_span_around_the_sdk_call_is_not_a_second_call():
    [want] = [c for c in _jsonl(FIXTURES / "calls.jsonl") if c["wrapped_by"]]
    spans = {
        s.span_id: s for i, raw in enumerate(_lines(SPANS), 1) if not isinstance(s := parse_span(i, raw), LineReject)
    }
    outer, inner = spans[want["wrapped_by"]], spans[want["request_id"]]
    assert outer.kind == inner.kind == "LLM" and inner.parent_id == outer.span_id  # llama-index's over openai's
    items = _convert(_lines(SPANS))
    assert not [i for i in items if i.line_no == outer.line_no]  # the wrapper's line holds no call
    call = _calls(items)[inner.span_id]
    assert call.record is not None and call.record["answer_model"] == "gpt-4.1-mini-2025-04-14"
    assert [r["chunk_id"] for r in call.record["retrieved"]] == want["retrieved"]


def test_both_phoenix_layouts_give_the_same_calls():
    def strip(items):
        return [
            (type(i).__name__, getattr(i, "record", None), i.reason) for i in items if not isinstance(i, LineReject)
        ]

    assert strip(_convert(_lines(SPANS))) == strip(_convert(_lines(FRAME)))


def test_pairing_takes_the_retrievers_that_ended_before_the_call_nearest_first():
    spans = [s for i, raw in enumerate(_lines(SPANS), 1) if not isinstance(s := parse_span(i, raw), LineReject)]
    trace = _Trace(spans)
    call = next(s for s in spans if s.kind == "LLM" and s.attrs["metadata.scenario"] == "damaged-item")
    retrievers = [s for s in spans if s.kind == "RETRIEVER" and s.trace_id == call.trace_id]
    assert len(retrievers) == 2  # one before the call, one after it (a follow-up retrieval)
    [paired] = pair_retrievers(trace, call)
    assert isinstance(paired.end, datetime) and isinstance(call.start, datetime)
    assert paired.end <= call.start and paired.span_id == min(r.span_id for r in retrievers)
    # LlamaIndex writes two RETRIEVER spans per retrieve() (retrieve and its child _retrieve): both are paired,
    # their documents once
    call = next(s for s in spans if s.kind == "LLM" and s.attrs["metadata.scenario"] == "refund-timing")
    assert [s.span_id for s in pair_retrievers(trace, call)] == [
        s.span_id for s in spans if s.kind == "RETRIEVER" and s.trace_id == call.trace_id
    ]


def test_pairing_ranks_the_retriever_under_the_calls_nearest_ancestor_first():
    lines = _lines(SPANS)
    call_obj = next(json.loads(raw) for raw in lines[2:] if _llm_of("refund-timing")(json.loads(raw)))
    chain_id, trace_id = call_obj["parent_id"], call_obj["context"]["trace_id"]
    # a step span under the chain, holding the call and a retriever of its own: that retriever's chunks rank
    # first, then the chain's retriever's (every retriever that ended before the call is used)
    step = {
        "name": "answer_step",
        "context": {"trace_id": trace_id, "span_id": "5e00000000000001"},
        "span_kind": "CHAIN",
        "parent_id": chain_id,
        "start_time": "2026-11-02T09:00:00.0055Z",
        "end_time": "2026-11-02T09:00:00.0075Z",
        "attributes": {},
    }
    inner = {
        "name": "rerank_fetch",
        "context": {"trace_id": trace_id, "span_id": "5e00000000000002"},
        "span_kind": "RETRIEVER",
        "parent_id": "5e00000000000001",
        "start_time": "2026-11-02T09:00:00.0056Z",
        "end_time": "2026-11-02T09:00:00.0058Z",
        "attributes": {
            "retrieval.documents.0.document.id": "kb-415#2",
            "retrieval.documents.0.document.content": "Damaged items must be reported within 48 hours.",
        },
    }
    lines = _edit(lines, _llm_of("refund-timing"), lambda s: s.update(parent_id="5e00000000000001"))
    lines += [json.dumps(step).encode(), json.dumps(inner).encode()]
    call = _calls(_convert(lines))[call_obj["context"]["span_id"]]
    assert call.record is not None
    assert [(r["chunk_id"], r["rank"]) for r in call.record["retrieved"]] == [
        ("kb-415#2", 1),
        ("kb-112#3", 2),
        ("kb-087#1", 3),
        ("kb-520#1", 4),
        ("kb-201#2", 5),
    ]


def test_chunk_ids_come_from_the_configured_metadata_key_when_the_tracer_logs_none():
    calls = _calls(_convert(_lines(SPANS), AdapterSettings(chunk_id_key="doc_id")))
    damaged = [c for c in calls.values() if c.record and c.record["surface"] == "returns"]
    # the LangChain-layout retriever has no document.id: its ids now come from metadata.doc_id
    assert ["kb-415", "kb-520"] in [[r["chunk_id"] for r in c.record["retrieved"]] for c in damaged if c.record]
    lines = _edit(
        _lines(SPANS),
        lambda s: s["attributes"].get("retrieval.documents.0.document.metadata.chunk_id") is not None,
        lambda s: s["attributes"].pop("retrieval.documents.0.document.metadata.chunk_id"),
    )
    [rejected] = [c for c in _calls(_convert(lines)).values() if c.reason == "invalid_retrieved"]
    assert "document 0" in (rejected.detail or "") and "'chunk_id'" in (rejected.detail or "")


def test_what_the_tracer_hid_or_cut_is_a_reject_never_a_guess():
    def reason(lines):  # the reasons besides the fixture's own two rejects
        return sorted({c.reason for c in _calls(_convert(lines)).values() if c.reason} - PLANTED_REJECTS)

    def content(key):
        return lambda s: s["attributes"].get(key) is not None and s["span_kind"] == "RETRIEVER"

    doc = "retrieval.documents.1.document.content"  # OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS on one retriever
    lines = _edit(_lines(SPANS), content(doc), lambda s: s["attributes"].update({doc: "__REDACTED__"}))
    assert sum(c.reason == "content_redacted" for c in _calls(_convert(lines)).values()) == 2
    lines = _edit(  # OPENINFERENCE_HIDE_OUTPUTS
        _lines(SPANS), _llm_of("refund-timing"), lambda s: s["attributes"].update({"output.value": "__REDACTED__"})
    )
    assert sum(c.reason == "content_redacted" for c in _calls(_convert(lines)).values()) == 2
    # no llm.input_messages (OPENINFERENCE_HIDE_INPUT_MESSAGES) on the llama-index span: its JSON input.value is
    # no request body, and with a text input.value there is no prompt at all
    lines = _edit(
        _lines(SPANS),
        _llm_of("exchange-sizes"),
        lambda s: [s["attributes"].pop(k) for k in list(s["attributes"]) if k.startswith("llm.input_messages")],
    )
    assert reason(lines) == ["prompt_undecodable"]
    lines = _edit(
        _lines(SPANS), _llm_of("exchange-sizes"), lambda s: s["attributes"].update({"input.mime_type": "text/plain"})
    )
    lines = _edit(
        lines,
        _llm_of("exchange-sizes"),
        lambda s: [s["attributes"].pop(k) for k in list(s["attributes"]) if k.startswith("llm.input_messages")],
    )
    assert reason(lines) == ["content_not_captured"]
    # native citations point into the request's blocks: a prompt rebuilt from messages cannot be checked
    lines = _edit(
        _lines(SPANS), _llm_of("native-citations"), lambda s: s["attributes"].update({"input.mime_type": "text/plain"})
    )
    [call] = [c for c in _calls(_convert(lines)).values() if c.reason and c.reason not in PLANTED_REJECTS]
    assert call.reason == "content_not_captured" and "native citations" in (call.detail or "")


def test_timestamps_and_surfaces():
    lines = _edit(_lines(SPANS), _llm_of("refund-timing"), lambda s: s.update(start_time="2026-11-02T09:00:00.006"))
    assert [c.reason for c in _calls(_convert(lines)).values() if c.reason == "invalid_timestamp"] == [
        "invalid_timestamp"
    ]
    # the surface comes from the span's metadata, else an ancestor's, else the default
    lines = _edit(_lines(SPANS), _llm_of("damaged-item"), lambda s: s["attributes"].pop("metadata.surface"))
    surfaces = {c.record["surface"] for c in _calls(_convert(lines)).values() if c.record}
    assert surfaces == {"help-center", "returns"}
    calls = _calls(_convert(_lines(SPANS), AdapterSettings(surface_key="team", default_surface="support")))
    assert {c.record["surface"] for c in calls.values() if c.record} == {"support"}


def test_an_answer_without_parsable_citations_goes_to_answer_rejects():
    lines = _edit(
        _lines(SPANS),
        _llm_of("exchange-sizes"),
        lambda s: s["attributes"].update({"llm.output_messages.0.message.content": "Exchanges are free [kb-201#2]."}),
    )
    records = [c.record for c in _calls(_convert(lines)).values() if c.record]
    [rec] = [r for r in records if r["answer_model"].startswith("llama")]
    assert rec["citations"] == rec["answer"] == "Exchanges are free [kb-201#2]."
    parsed = parse_record(rec, NOW)
    assert isinstance(parsed, Record) and parsed.answer_reject is not None
    assert parsed.answer_reject.reason == "citations_not_json"


def test_every_citation_gets_its_planted_reason_and_every_call_lands_once(tmp_path):
    """The span export itself in the landing folder: ingest detects and converts it, the gate gives every
    citation its planted reason, the bad line and the two hidden/cut calls are rejects, and a rerun adds nothing."""
    from citegate_assets.lib.config import parse_config
    from citegate_assets.lib.ingest.stream import ingest_landing
    from citegate_assets.lib.provenance.gate import check_provenance
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "phoenix_spans.jsonl").write_bytes(SPANS.read_bytes())
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        for _ in range(2):
            ingest_landing(con, landing, parse_config({}, None), final=True)
        rejects = sorted(con.sql("select line_no, reason from ingest_rejects").fetchall())
        prompts = con.sql("select request_id, prompt_reconstructed from prompts").fetchall()
        check_provenance(con, date(2026, 11, 1), date(2026, 11, 30))
        got = dict(con.sql("select citation_id, reason from provenance_results").fetchall())
    calls = _jsonl(FIXTURES / "calls.jsonl")
    assert sorted(rid for rid, _ in prompts) == sorted(c["request_id"] for c in calls if not c["reason"])
    assert all(flag for _, flag in prompts)
    assert [reason for _, reason in rejects] == ["invalid_json", "content_redacted", "content_truncated"]
    truth = _jsonl(FIXTURES / "truth.jsonl")
    expected = {f"{t['request_id']}#{t['position']}": t["expected_reason"] for t in truth}
    assert {t["expected_reason"] for t in truth} == REASONS
    assert got == expected
