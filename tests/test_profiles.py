"""Every provenance reason on every built-in profile and each prompt encoding, end to end through
ingest (decode, split, normalize) and the provenance SQL."""

from datetime import date

import pytest

from citegate_assets.lib.ingest.profiles import BUILTIN_PROFILES
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance

from .helpers import CITATIONS, PROFILE_ENCODINGS, scenario_record, write_jsonl

DAY = date(2026, 11, 2)


def test_builtin_profile_names():
    assert set(BUILTIN_PROFILES) == {
        "auto",
        "anthropic-xml",
        "llamaindex-citation",
        "langchain-stuff",
        "langchain-stuff-mustache",
        "plain-list",
    }


@pytest.mark.parametrize("template,encoding", PROFILE_ENCODINGS)
def test_every_reason(template, encoding, con, landing, config):
    write_jsonl(landing / "day.jsonl", [scenario_record(template, encoding)])
    summary = ingest_landing(con, landing, config)
    assert (summary.records_ingested, summary.records_rejected) == (1, 0)
    assert check_provenance(con, DAY, date(2026, 11, 3)) == len(CITATIONS)
    got = dict(con.sql("select citation_id, reason from provenance_results").fetchall())
    expected = {f"req-1#{i}": reason for i, (_, _, reason) in enumerate(CITATIONS)}
    assert got == expected
    [(status, n_sections)] = con.sql("select profile_status, n_sections from prompts").fetchall()
    assert (status, n_sections) == ("ok", 3)


@pytest.mark.parametrize("template,encoding", PROFILE_ENCODINGS)
def test_auto_agrees_with_the_named_profile(template, encoding, con, landing, config):
    """The same prompt with no template configured (auto) gets every reason the named profile gives."""
    record = scenario_record(template, encoding)
    del record["template"]
    write_jsonl(landing / "day.jsonl", [record])
    ingest_landing(con, landing, config)
    check_provenance(con, DAY, date(2026, 11, 3))
    got = dict(con.sql("select citation_id, reason from provenance_results").fetchall())
    assert got == {f"req-1#{i}": reason for i, (_, _, reason) in enumerate(CITATIONS)}
    [(template_used, status, n_sections)] = con.sql(
        "select template, profile_status, n_sections from prompts"
    ).fetchall()
    assert (template_used, status, n_sections) == ("auto", "ok", 3)


@pytest.mark.parametrize("template,encoding", PROFILE_ENCODINGS)
def test_ok_offsets_point_at_the_span_inside_the_cited_section(template, encoding, con, landing, config):
    write_jsonl(landing / "day.jsonl", [scenario_record(template, encoding)])
    ingest_landing(con, landing, config)
    check_provenance(con, DAY, date(2026, 11, 3))
    rows = con.sql(
        """
        select r.citation_id, substr(p.prompt_normalized, r.found_start + 1, r.found_end - r.found_start),
               c.span_normalized,
               s.body_start <= r.found_start and r.found_end <= s.body_end
        from provenance_results r
        join citations c on c.citation_id = r.citation_id
        join prompts p on p.request_id = r.request_id
        join prompt_sections s on s.request_id = r.request_id and s.chunk_id = r.chunk_id
        where r.reason = 'ok'
        """
    ).fetchall()
    assert len(rows) == 2
    for _, found, span, inside in rows:
        assert found == span and inside


def test_truncated_share_and_section_resolution(con, landing, config):
    write_jsonl(landing / "day.jsonl", [scenario_record("llamaindex-citation", "text")])
    ingest_landing(con, landing, config)
    check_provenance(con, DAY, date(2026, 11, 3))
    sections = con.sql(
        "select section_no, header_ref, chunk_id, resolved_by, truncated from prompt_sections order by section_no"
    ).fetchall()
    assert sections == [  # "Source N:" carries no id: the chunks are found by content inside the fences
        (0, "1", "kb-1#c1", "auto_whole", False),
        (1, "2", "kb-2#c1", "auto_whole", False),
        (2, "3", "kb-3#c2", "auto_prefix", True),
    ]
    [(share,)] = con.sql(
        "select chunk_share_in_prompt from provenance_results where reason = 'span_truncated'"
    ).fetchall()
    assert 0.4 < share < 0.6  # "Data is retained for 90 days. After that" of the 84-character chunk
    in_prompt = dict(con.sql("select chunk_id, in_prompt from retrievals").fetchall())
    assert in_prompt == {"kb-1#c1": True, "kb-2#c1": True, "kb-3#c2": True, "kb-4#c1": False}


def test_few_shot_sources_are_not_context(con, landing, config):
    """LlamaIndex's example block has fake 'Source 1:' headers above the fences: they must not count."""
    record = scenario_record("llamaindex-citation", "text")
    record["citations"] = [{"chunk_id": "kb-1#c1", "span": "Water is wet when the sky is red.", "claim": "c"}]
    write_jsonl(landing / "day.jsonl", [record])
    ingest_landing(con, landing, config)
    check_provenance(con, DAY, date(2026, 11, 3))
    assert con.sql("select reason from provenance_results").fetchall() == [("span_outside_context",)]


def test_mustache_prompt_is_unescaped_before_matching(con, landing, config):
    write_jsonl(landing / "day.jsonl", [scenario_record("langchain-stuff-mustache", "json")])
    ingest_landing(con, landing, config)
    [(raw, normalized)] = con.sql("select prompt_raw, prompt_normalized from prompts").fetchall()
    assert "&amp;" in raw and "&quot;" in raw
    assert "customers & partners" in normalized and '"Enterprise"' in normalized


def test_prompt_without_context_block_is_unverifiable_not_guessed(con, landing, config):
    record = scenario_record("plain-list", "text")
    record["prompt"] = record["prompt"].replace("Context:", "Background:")
    write_jsonl(landing / "day.jsonl", [record])
    ingest_landing(con, landing, config)
    check_provenance(con, DAY, date(2026, 11, 3))
    assert con.sql("select distinct verdict, reason from provenance_results").fetchall() == [
        ("unverifiable", "context_not_found")
    ]
    assert con.sql("select profile_status from prompts").fetchall() == [("no_context_block",)]


def test_document_blocks_are_cited_by_their_title_source_or_position(con, landing, config):
    """Anthropic document / search_result blocks: the block is the chunk; an answer may name it by the block's
    title (documents) or source (search results) instead of the chunk id, or by its position."""
    import json

    from citegate_assets import guard

    refunds, support = "Refunds take 3 to 5 business days.", "Support is open around the clock for Enterprise."
    body = {
        "model": "claude",
        "max_tokens": 100,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": refunds},
                        "title": "Refund policy",
                    },
                    {
                        "type": "search_result",
                        "source": "https://help.example/support",
                        "title": "Support hours",
                        "content": [{"type": "text", "text": support}],
                    },
                    {"type": "text", "text": "How long do refunds take?"},
                ],
            }
        ],
    }
    retrieved = [
        {"chunk_id": "kb-1#c1", "rank": 1, "text": refunds},
        {"chunk_id": "kb-2#c1", "rank": 2, "text": support},
    ]
    citations = [
        {"chunk_id": "Refund policy", "span": "3 to 5 business days", "claim": "Refunds take 3 to 5 business days."},
        {"chunk_id": "https://help.example/support", "span": "around the clock", "claim": "Support never closes."},
        {"chunk_id": "2", "span": "around the clock", "claim": "Support never closes."},
        {"chunk_id": "Refund policy", "span": "around the clock", "claim": "Refunds never close."},
    ]
    record = {
        "request_id": "r-blocks",
        "logged_at": "2026-11-02T10:00:00Z",
        "surface": "s",
        "answer_model": "m",
        "prompt": json.dumps(body),
        "prompt_encoding": "json",
        "retrieved": retrieved,
        "citations": citations,
    }
    write_jsonl(landing / "day.jsonl", [record])
    ingest_landing(con, landing, config)
    check_provenance(con, DAY, date(2026, 11, 3))
    rows = con.sql(
        "select r.citation_id, r.chunk_id, r.reason, c.cited_as from provenance_results r "
        "join citations c using (citation_id) order by 1"
    ).fetchall()
    assert rows == [
        ("r-blocks#0", "kb-1#c1", "ok", "Refund policy"),
        ("r-blocks#1", "kb-2#c1", "ok", "https://help.example/support"),
        ("r-blocks#2", "kb-2#c1", "ok", "2"),
        ("r-blocks#3", "kb-1#c1", "span_in_other_chunk", "Refund policy"),
    ]
    checked = guard.check_citations(record["prompt"], retrieved, citations, encoding="json")
    assert [(c.checked_chunk_id, c.reason) for c in checked.citations] == [(cid, reason) for _, cid, reason, _ in rows]
