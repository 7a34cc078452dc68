"""Inline citation markers and span-less citations (docs/log-format.md): every marker style and every planted reason
(ok, span_truncated by the anchor, dropped_before_prompt, fabricated_id) in the warehouse's tables after a real
ingest and gate, the same verdicts from the call-time guard, and the reader's rules for sentences and non-markers."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets import guard
from citegate_assets.lib.config import ConfigError, parse_config
from citegate_assets.lib.ingest.markers import MarkerRefs, read_markers
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

from .helpers import (
    CUSTOM_MARKER,
    MARKER_CHUNKS,
    MARKER_STYLES,
    marker_expected,
    marker_record,
    spanless_record,
    write_jsonl,
)

NOW = datetime(2026, 11, 30, tzinfo=timezone.utc)
HEADERS = ("source", "document", "index", "none")
CONFIG = {"surfaces": {"custom": {"citation_marker": CUSTOM_MARKER}}}


def _gate(tmp_path, records: list[dict]) -> dict[str, dict]:
    """Each citation's row of citations joined to provenance_results, after a real ingest and gate."""
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    write_jsonl(landing / "calls.jsonl", records)
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        summary = ingest_landing(con, landing, parse_config(CONFIG, None), final=True, now=NOW)
        assert summary.records_rejected == 0 and summary.answers_rejected == 0
        check_provenance(con, date(2026, 11, 1), date(2026, 12, 1))
        cursor = con.execute(
            "select c.citation_id, c.request_id, c.position, c.origin, c.cited_as, c.chunk_id, c.span, c.claim, "
            "c.span_given, c.anchor_start, c.anchor_end, c.anchor_prompt_start, r.reason, r.found_start, "
            "r.found_end, r.chunk_share_in_prompt, p.prompt_normalized, "
            "coalesce(t.text_normalized, "
            "substr(p.prompt_normalized, t.prompt_start + 1, t.prompt_end - t.prompt_start)) as chunk_text "
            "from citations c join provenance_results r using (citation_id) "
            "join prompts p on p.request_id = c.request_id "
            "left join retrievals t on t.request_id = c.request_id and t.chunk_id = c.chunk_id order by c.citation_id"
        )
        names = [d[0] for d in cursor.description]
        return {row[0]: dict(zip(names, row)) for row in cursor.fetchall()}


def _guard(record: dict) -> list:
    report = guard.check_citations(
        record["prompt"],
        record["retrieved"],
        record.get("citations"),
        answer=record.get("answer"),
        surface=record["surface"],
        config=parse_config(CONFIG, None),
    )
    return list(report.citations)


@pytest.mark.parametrize("headers", HEADERS)
def test_every_marker_style_gets_every_planted_reason_in_the_pipeline_and_the_guard(tmp_path, headers):
    records = [marker_record(style, headers) for style in MARKER_STYLES]
    rows = _gate(tmp_path, records)
    for record in records:
        style = record["request_id"].split("-")[1]
        expected = marker_expected(style)
        mine = sorted(
            (r for r in rows.values() if r["request_id"] == record["request_id"]), key=lambda r: r["position"]
        )
        got = [(r["chunk_id"], r["claim"], r["reason"]) for r in mine]
        assert got == expected, (style, headers)
        assert {r["origin"] for r in mine} == {"marker"} and not any(r["span_given"] for r in mine)
        assert all(r["span"] is None for r in mine)
        written = {
            MARKER_STYLES[style]([int(r["chunk_id"].split("#")[-1])]) for r in mine if r["reason"] != "fabricated_id"
        }
        assert {r["cited_as"] for r in mine if len(r["cited_as"]) <= 8} <= written | {
            MARKER_STYLES[style]([9])
        } or style in ("list", "ranges", "sources")
        # the same citations, reasons and places from the guard, one call at a time
        verdicts = _guard(record)
        assert [(v.checked_chunk_id, v.reason, v.found_start, v.found_end) for v in verdicts] == [
            (r["chunk_id"], r["reason"], r["found_start"], r["found_end"]) for r in mine
        ], (style, headers)
        assert [v.cited_as for v in verdicts] == [r["cited_as"] for r in mine]


def test_a_range_and_a_list_keep_the_marker_as_written(tmp_path):
    rows = _gate(tmp_path, [marker_record("ranges"), marker_record("list")])
    by_request = {}
    for r in rows.values():
        by_request.setdefault(r["request_id"], []).append((r["position"], r["chunk_id"], r["cited_as"]))
    ranges = [c for _, c, a in sorted(by_request["markers-ranges-source"]) if a == "[1-3]"]
    assert ranges == ["kb#1", "kb#2", "kb#3"]  # a range expands, each citation keeps "[1-3]"
    assert [(c, a) for _, c, a in sorted(by_request["markers-list-source"]) if ", " in a] == [
        ("kb#2", "[2, 3]"),
        ("kb#3", "[2, 3]"),
        ("kb#4", "[4, 5]"),
        ("kb#5", "[4, 5]"),
        ("kb#1", "[1, 2, 3]"),
        ("kb#2", "[1, 2, 3]"),
        ("kb#3", "[1, 2, 3]"),
    ]


def test_the_anchor_is_the_best_supporting_sentence_with_its_offsets_in_the_retrieved_text_and_the_prompt(tmp_path):
    rows = _gate(tmp_path, [marker_record("brackets")])
    by_claim = {(r["claim"], r["chunk_id"]): r for r in rows.values()}
    truncated = by_claim[("Audit logs are retained for 400 days on the Team plan.", "kb#3")]
    text = truncated["chunk_text"]
    assert text[truncated["anchor_start"] : truncated["anchor_end"]] == (
        "Audit logs are retained for 400 days on the Team plan."
    )
    assert truncated["anchor_prompt_start"] is None and truncated["found_start"] is None  # it never reached the prompt
    assert truncated["reason"] == "span_truncated" and 0.5 < truncated["chunk_share_in_prompt"] < 0.8
    ok = by_claim[("Refunds take 3 to 5 business days to appear on your statement.", "kb#1")]
    anchor = "Once a refund is approved, it takes 3 to 5 business days to appear on your statement."
    assert ok["chunk_text"][ok["anchor_start"] : ok["anchor_end"]] == anchor
    assert ok["prompt_normalized"][ok["found_start"] : ok["found_end"]] == anchor
    assert (ok["found_start"], ok["found_end"]) == (ok["anchor_prompt_start"], ok["anchor_prompt_start"] + len(anchor))
    # reached part of the cut chunk: ok, placed in the prompt
    reached = by_claim[
        ("Backups are encrypted with AES-256 and Pro customers get answers within one business day.", "kb#3")
    ]
    assert reached["reason"] == "ok"
    assert reached["prompt_normalized"][reached["found_start"] : reached["found_end"]].startswith(
        "Backups are encrypted"
    )
    # no sentence of kb#1 shares a word with the claim: ok for provenance, no anchor (the judge decides)
    none = by_claim[("Support is available around the clock for Enterprise customers.", "kb#1")]
    assert none["reason"] == "ok" and none["anchor_start"] is None and none["found_start"] is None
    dropped = by_claim[("The REST API allows 600 requests per minute per token.", "kb#5")]
    assert dropped["reason"] == "dropped_before_prompt" and dropped["found_start"] is None
    assert dropped["chunk_text"][dropped["anchor_start"] : dropped["anchor_end"]].startswith("The REST API allows 600")


def test_an_anchor_the_cut_runs_through_counts_as_reached_only_when_its_reached_part_holds_the_claims_words(tmp_path):
    """kb#3 reached the prompt up to "...stored in two": its second sentence is cut in the middle."""
    record = spanless_record(request_id="boundary")
    record["citations"] = [
        {"chunk_id": "kb#3", "claim": "Backups are encrypted with AES-256."},  # all before the cut
        {"chunk_id": "kb#3", "claim": "Backups are stored in two regions."},  # "regions" was cut
    ]
    rows = sorted(_gate(tmp_path, [record]).values(), key=lambda r: r["position"])
    assert [r["reason"] for r in rows] == ["ok", "span_truncated"]
    before, cut = rows
    sentence = "Backups are encrypted with AES-256 and stored in two regions."
    assert before["chunk_text"][before["anchor_start"] : before["anchor_end"]] == sentence
    assert cut["chunk_text"][cut["anchor_start"] : cut["anchor_end"]] == sentence
    # the part that reached the prompt is where the ok one is placed
    assert before["prompt_normalized"][before["found_start"] : before["found_end"]] == sentence[: -len(" regions.")]
    assert [v.reason for v in _guard(record)] == ["ok", "span_truncated"]


@pytest.mark.parametrize("headers", HEADERS)
def test_spanless_structured_citations_get_every_planted_reason_in_the_pipeline_and_the_guard(tmp_path, headers):
    record = spanless_record(headers)
    rows = sorted(_gate(tmp_path, [record]).values(), key=lambda r: r["position"])
    expected = [
        (f"kb#{c.split('#')[-1]}" if "#" in c else f"kb#{c}", claim, reason)
        for c, claim, reason in marker_expected("chunk_ids")
    ]
    assert [(r["chunk_id"], r["claim"], r["reason"]) for r in rows] == expected
    assert {r["origin"] for r in rows} == {"structured"} and {r["span_given"] for r in rows} == {False}
    assert all(r["cited_as"] is None for r in rows)
    verdicts = _guard(record)
    assert [(v.checked_chunk_id, v.reason, v.found_start, v.found_end, v.anchor) for v in verdicts] == [
        (
            r["chunk_id"],
            r["reason"],
            r["found_start"],
            r["found_end"],
            (r["anchor_start"], r["anchor_end"]) if r["anchor_start"] is not None else None,
        )
        for r in rows
    ]


def test_a_record_may_omit_citations_and_one_with_neither_citations_nor_markers_has_none(tmp_path):
    plain = marker_record("brackets", request_id="no-markers")
    plain["answer"] = "Refunds take a few days. Nothing here is cited (see the policy)."
    no_answer = marker_record("brackets", request_id="no-answer")
    del no_answer["answer"]
    given = marker_record("brackets", request_id="given")
    given["citations"] = [{"chunk_id": "kb#2", "span": "Pro customers get answers", "claim": "Pro answers."}]
    empty = marker_record("brackets", request_id="empty-list")
    empty["citations"] = []
    rows = _gate(tmp_path, [plain, no_answer, given, empty])
    with connect(tmp_path / "w.duckdb", read_only=True) as con:
        assert sorted(r for (r,) in con.sql("select request_id from prompts").fetchall()) == sorted(
            ["no-markers", "no-answer", "given", "empty-list"]
        )
    per_request: dict[str, list] = {}
    for r in rows.values():
        per_request.setdefault(r["request_id"], []).append(r)
    assert "no-markers" not in per_request and "no-answer" not in per_request
    # citations given: they are what is checked, the answer's markers are not read
    assert [(r["origin"], r["chunk_id"], r["reason"]) for r in per_request["given"]] == [("structured", "kb#2", "ok")]
    assert len(per_request["empty-list"]) == 11 and {r["origin"] for r in per_request["empty-list"]} == {"marker"}


def test_a_surface_marker_pattern_is_checked_at_load_time_naming_the_key():
    for bad, why in (
        (r"\{\{(\d+)\}\}", "no named group 'ref'"),
        (r"\{\{(?P<ref>\d+", "not a regular expression"),
        (r"(?P<ref>\d*)", "matches empty text"),
        (7, "a regular expression"),
    ):
        with pytest.raises(ConfigError) as raised:
            parse_config({"surfaces": {"chat": {"citation_marker": bad}}}, "citegate.toml")
        assert "citegate.toml: surfaces.chat.citation_marker" in str(raised.value) and why in str(raised.value)
    config = parse_config(CONFIG, None)
    assert config.surface("custom").citation_marker == CUSTOM_MARKER and config.surface("other").citation_marker == ""


REFS = MarkerRefs(
    positions={"1": "kb#1", "2": "kb#2", "3": "kb#3"},
    retrieved={"kb#1", "kb#2", "kb#3", "kb#4", "doc-12"},
    absent_by_rank={"4": "kb#4"},
)


def _read(answer: str, **kwargs) -> list[tuple[str, str, str]]:
    return [(m.ref, m.cited_as, m.claim) for m in read_markers(answer, REFS, **kwargs)]


def test_sentences_survive_abbreviations_decimals_and_markers_after_the_period():
    answer = (
        "He moved to St. Louis [1][3]. Dr. Smith said it cost $3.5 million, e.g. for the U.S. office [2]. "
        "Prices rose 2.5% in Jan. 2026 [1].[2] Fig. 3 shows No. 5 [3]. The end.[1] Next one [2]."
    )
    assert _read(answer) == [
        ("1", "[1]", "He moved to St. Louis."),
        ("3", "[3]", "He moved to St. Louis."),
        ("2", "[2]", "Dr. Smith said it cost $3.5 million, e.g. for the U.S. office."),
        ("1", "[1]", "Prices rose 2.5% in Jan. 2026."),
        ("2", "[2]", "Prices rose 2.5% in Jan. 2026."),
        ("3", "[3]", "Fig. 3 shows No. 5."),
        ("1", "[1]", "The end."),
        ("2", "[2]", "Next one."),
    ]


def test_lists_headings_and_tables_each_make_sentences_and_a_lone_marker_joins_the_sentence_before():
    answer = (
        "## Refunds [1]\n\n"
        "Refunds work as follows:\n"
        "- Refunds go to the original method [1]\n"
        "- They take 3 to 5 days. Annual plans are prorated [2]\n"
        "  with no fee [3]\n"
        "1. **Support** is around the clock\n"
        "[2]\n\n"
        "| Plan | Price |\n|---|---|\n| Pro | $49 per month [3] |\n"
    )
    assert _read(answer) == [
        ("1", "[1]", "Refunds"),
        ("1", "[1]", "Refunds go to the original method"),
        ("2", "[2]", "Annual plans are prorated with no fee"),
        ("3", "[3]", "Annual plans are prorated with no fee"),
        ("2", "[2]", "**Support** is around the clock"),
        ("3", "[3]", "Pro | $49 per month"),
    ]


def test_code_links_years_intervals_bracketed_words_and_source_lists_are_not_markers():
    answer = (
        "Use `items[2]` or\n```python\nx = data[3]\n```\n"
        "See [the policy](https://help.example/refunds[1]) and https://x.example/a for details. "
        "In [2019] values lay in [0, 1] [sic] and [x] boxes [citation needed]. Refunds are prompt [1].\n\n"
        "> Quoted, it still counts [2].\n"
        "Sources: [1], [2]\n"
        "Source: [3] refunds.md\n\n"
        "## References\n[1] kb one\n[2] kb two [3]\n"
    )
    # the years, the interval and the bracketed words stay in their sentence's text; that sentence cites nothing
    assert _read(answer) == [("1", "[1]", "Refunds are prompt."), ("2", "[2]", "Quoted, it still counts.")]
    # a marker right after a URL is the answer's, not part of the URL
    assert _read("Details are at https://x.example/a[2].") == [("2", "[2]", "Details are at https://x.example/a.")]


def test_footnotes_resolve_through_their_definitions_which_are_not_claims():
    answer = (
        "Refunds are prompt[^a]. Support is fast[^2]. Shipping is free[^3].\n\n"
        "[^a]: Source 3\n[^2]: see doc-12\n[^3]: refunds.md, 2024"
    )
    assert [(m.kind, m.ref, m.cited_as, m.claim) for m in read_markers(answer, REFS)] == [
        ("number", "3", "[^a]", "Refunds are prompt."),
        ("id", "doc-12", "[^2]", "Support is fast."),
        ("number", "3", "[^3]", "Shipping is free."),
    ]


def test_a_bracket_copied_with_the_chunk_text_around_it_is_the_chunks_own_not_a_citation():
    chunk = "As shown in the audit report [3], backups are encrypted at rest."
    answer = "As shown in the audit report [3], backups are encrypted at rest [1]. Also [3] covers it [2]."
    got = [(m.ref, m.claim) for m in read_markers(answer, REFS, chunk_texts=[chunk])]
    assert got == [
        ("1", "As shown in the audit report, backups are encrypted at rest."),
        ("3", "Also covers it."),
        ("2", "Also covers it."),
    ]


def test_chunk_id_markers_are_the_calls_ids_or_their_shape_and_a_number_resolves_header_then_rank():
    answer = "Aa [kb#2]. Bb [kb#9]. Cc [doc-12]. Dd [doc-7]. Ee [draft]. Ff [4]. Gg [7]. Hh [Source 2]."
    found = read_markers(answer, REFS)
    assert [(m.kind, m.ref) for m in found] == [
        ("id", "kb#2"),
        ("id", "kb#9"),
        ("id", "doc-12"),
        ("id", "doc-7"),
        ("number", "4"),
        ("number", "7"),
        ("number", "2"),
    ]
    assert [REFS.resolve(m.kind, m.ref) for m in found] == ["kb#2", None, "doc-12", None, "kb#4", None, "kb#2"]


def test_a_surface_pattern_replaces_the_built_in_styles():
    answer = "Refunds are prompt {{1}}. Support is fast [2]. Shipping {{kb#4}} is free {{2-3}}."
    found = read_markers(answer, REFS, pattern=CUSTOM_MARKER)
    assert [(m.kind, m.ref, m.cited_as) for m in found] == [
        ("number", "1", "{{1}}"),
        ("id", "kb#4", "{{kb#4}}"),
        ("number", "2", "{{2-3}}"),
        ("number", "3", "{{2-3}}"),
    ]
    assert found[1].claim == "Shipping is free."


def test_markers_in_an_answer_with_chunk_texts_from_the_log_record_round_trip(tmp_path):
    """guard.to_log_record without citations writes a line the pipeline reads the markers of."""
    record = marker_record("brackets")
    line = guard.to_log_record(
        request_id="logged-1",
        surface="markers",
        answer_model="gpt-test",
        prompt=record["prompt"],
        retrieved=record["retrieved"],
        answer=record["answer"],
        logged_at=datetime(2026, 11, 2, 10, tzinfo=timezone.utc),
    )
    assert "citations" not in line
    rows = _gate(tmp_path, [json.loads(json.dumps(line))])
    assert sorted(r["reason"] for r in rows.values()) == sorted(reason for _, _, reason in marker_expected("brackets"))
    assert set(MARKER_CHUNKS) >= {r["chunk_id"] for r in rows.values() if r["reason"] != "fabricated_id"}


MARKER_FIXTURES = Path(__file__).parent / "fixtures" / "frameworks" / "markers"


def test_marker_answers_of_llamaindex_citation_engine_get_every_planted_reason_in_the_pipeline_and_the_guard(tmp_path):
    """Request bodies LlamaIndex's CitationQueryEngine really sent and the markers its answers carry
    (scripts/render_fixtures.py; tests/fixtures/frameworks/markers/README.md): no citations logged, no template set."""
    files = sorted(MARKER_FIXTURES.glob("llamaindex_*.jsonl"))
    records = [json.loads(line) for path in files for line in path.read_text(encoding="utf-8").splitlines()]
    assert records and not any("citations" in r for r in records)
    truth = [json.loads(line) for line in (MARKER_FIXTURES / "truth.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {t["expected_reason"] for t in truth} == {"ok", "fabricated_id", "dropped_before_prompt", "span_truncated"}
    rows = _gate(tmp_path, records)
    got = {cid: (r["chunk_id"], r["claim"], r["reason"], r["origin"]) for cid, r in rows.items()}
    expected = {
        f"{t['request_id']}#{t['position']}": (t["chunk_id"], t["claim"], t["expected_reason"], "marker") for t in truth
    }
    assert got == expected
    by_request: dict[str, list] = {}
    for r in rows.values():
        by_request.setdefault(r["request_id"], []).append(r)
    for record in records:
        verdicts = guard.check_citations(
            record["prompt"], record["retrieved"], answer=record["answer"], encoding="json"
        )
        mine = sorted(by_request[record["request_id"]], key=lambda r: r["position"])
        assert [(v.checked_chunk_id, v.reason, v.found_start, v.found_end) for v in verdicts.citations] == [
            (r["chunk_id"], r["reason"], r["found_start"], r["found_end"]) for r in mine
        ]


def test_a_line_led_by_its_marker_cites_its_sentence_and_a_trailing_reference_list_is_no_claim():
    answer = (
        "Refunds take 3 days [1].\n"
        "[2] Support is around the clock.\n"
        "Shipping is free (see [3]). It applies to [1, 2, and 3] regions.\n\n"
        "[1] Refund policy (refunds.md)\n"
        "[2] Support page\n"
    )
    assert _read(answer) == [
        ("1", "[1]", "Refunds take 3 days."),
        ("2", "[2]", "Support is around the clock."),
        ("3", "[3]", "Shipping is free."),
        ("1", "[1, 2, and 3]", "It applies to regions."),
        ("2", "[1, 2, and 3]", "It applies to regions."),
        ("3", "[1, 2, and 3]", "It applies to regions."),
    ]


def test_migration_17_reads_earlier_citations_as_structured_with_a_span(tmp_path):
    """A schema 16 warehouse (no origin, span_given or anchor columns) is upgraded in place: its citations read as
    structured with a span, and the gate gives them the reasons it gave before."""
    from citegate_assets.lib.storage.warehouse import SCHEMA_VERSION

    record = spanless_record(request_id="before")
    record["citations"] = [{"chunk_id": "kb#1", "span": "Refunds are issued", "claim": "Refunds go back."}]
    before = _gate(tmp_path, [record])
    with connect(tmp_path / "w.duckdb") as con:
        for column in (
            "origin",
            "span_given",
            "anchor_start",
            "anchor_end",
            "anchor_prompt_start",
            "anchor_prompt_end",
        ):
            con.execute(f"alter table citations drop column {column}")
        for column in ("origin", "cited_as", "span_given", "anchor", "anchor_start", "anchor_end"):
            con.execute(f"alter table citation_queue drop column {column}")
        con.execute("delete from schema_version")
        con.execute("insert into schema_version values (17, now())")
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        assert con.sql("select max(version) from schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(18,)]
        assert con.sql("select origin, span_given, anchor_start from citations").fetchall() == [
            ("structured", True, None)
        ]
        check_provenance(con, date(2026, 11, 1), date(2026, 12, 1))
        assert (
            con.sql("select citation_id, reason from provenance_results").fetchall()
            == [(cid, r["reason"]) for cid, r in before.items()]
            == [("before#0", "ok")]
        )


def test_the_log_format_pages_example_lines_give_the_reasons_it_states(tmp_path):
    page = (Path(__file__).resolve().parents[1] / "docs" / "log-format.md").read_text(encoding="utf-8")
    section = page[page.index("## Citations") :]
    block = section[section.index("```json\n") + 8 :]
    records = [json.loads(line) for line in block[: block.index("```")].splitlines()]
    assert [r["request_id"] for r in records] == ["req-1", "req-2", "req-3", "req-4"]
    rows = _gate(tmp_path, records)
    got = {cid: (r["origin"], r["cited_as"], r["chunk_id"], r["reason"]) for cid, r in rows.items()}
    assert got == {
        "req-1#0": ("structured", None, "kb#1", "ok"),
        "req-2#0": ("structured", None, "kb#1", "ok"),
        "req-3#0": ("marker", "[1]", "kb#1", "ok"),
        "req-3#1": ("marker", "[3]", "kb#3", "dropped_before_prompt"),
        "req-3#2": ("marker", "[2]", "kb#2", "ok"),
        "req-3#3": ("marker", "[7]", "7", "fabricated_id"),
        "req-4#0": ("native", None, "kb#1", "ok"),
    }
    assert rows["req-2#0"]["span_given"] is False and rows["req-2#0"]["found_start"] is not None


def _layout(rng, cited: list[tuple[str, str]], style: str) -> str:
    """(claim, its markers) laid out as a model might: a paragraph, a bullet or numbered list, markers after the
    period, a lead-in line, a heading, a trailing sources list."""
    layout = rng.choice(["paragraph", "bullets", "numbered", "after_period", "lines"])
    if layout == "after_period":
        sentences = [f"{claim}.{markers}" for claim, markers in cited]
    else:
        sentences = [f"{claim} {markers}." for claim, markers in cited]
    if layout == "bullets":
        body = "\n".join(f"- {s}" for s in sentences)
    elif layout == "numbered":
        body = "\n".join(f"{n}. {s}" for n, s in enumerate(sentences, 1))
    elif layout == "lines":
        body = "\n".join(sentences)
    else:
        body = " ".join(sentences)
    lead = rng.choice(["", "Based on the sources: ", "## Answer\n\n", "Here is what I found:\n\n"])
    if layout in ("bullets", "numbered"):
        lead = lead.replace(": ", ":\n")  # a list starts on its own line
    tail = rng.choice(["", "\n\nSources: [1], [2]", "\n\n**References:**\n- [1] refunds\n- [2] support", ""])
    if style in ("footnotes", "custom", "chunk_ids", "sources", "lenticular"):
        tail = ""  # their definitions are the footnotes, or no numbered list makes sense
    answer = lead + body + tail
    if style == "footnotes":
        answer += "\n\n" + "\n".join(f"[^{n}]: Source {n}" for n in (1, 2, 3, 4, 5, 9))
    return answer


def test_answers_laid_out_as_models_write_them_get_every_planted_reason_from_the_guard():
    """400 answers drawn at random (a fixed seed): every style, random plants in random order, in paragraphs, lists,
    lines, with markers after the period, lead-ins, headings and sources lists. Every citation is read with its
    planted reason."""
    import random

    from .helpers import MARKER_PLANTS

    rng = random.Random(7)
    checked = 0
    for n in range(400):
        style = rng.choice(sorted(MARKER_STYLES))
        plants = rng.sample(MARKER_PLANTS, rng.randint(1, len(MARKER_PLANTS)))
        write = MARKER_STYLES[style]
        sentences = [(claim, write([k for k, _ in cited])) for claim, cited in plants]
        record = marker_record(style, rng.choice(HEADERS), request_id=f"drawn-{n}")
        record["answer"] = _layout(rng, sentences, style)
        verdicts = _guard(record)
        expected = [
            (f"kb#{k}" if k <= 5 or style == "chunk_ids" else str(k), claim + ".", reason)
            for claim, cited in plants
            for k, reason in cited
        ]
        got = [(v.checked_chunk_id, v.claim, v.reason) for v in verdicts]
        assert got == expected, (n, style, record["answer"])
        checked += len(got)
    assert checked > 1500


def test_an_answer_with_more_markers_than_the_bound_is_an_answer_reject_and_a_guard_error(tmp_path):
    from citegate_assets.lib.ingest.markers import MAX_MARKERS

    flood = marker_record("brackets", request_id="flood")
    flood["answer"] = "Refunds take 3 to 5 business days [1]. " * (MAX_MARKERS + 1)
    fine = marker_record("brackets", request_id="fine")
    landing = tmp_path / "landing"
    landing.mkdir()
    write_jsonl(landing / "calls.jsonl", [flood, fine])
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        summary = ingest_landing(con, landing, parse_config(CONFIG, None), final=True, now=NOW)
        assert (summary.records_ingested, summary.records_rejected, summary.answers_rejected) == (2, 0, 1)
        assert con.sql("select request_id, reason, detail from answer_rejects").fetchall() == [
            ("flood", "too_many_markers", f"answer: the answer holds more than {MAX_MARKERS} citation markers")
        ]
        counts = dict(con.sql("select request_id, count(*) from citations group by 1").fetchall())
    assert counts == {"fine": 11}  # the other call of the file still lands
    with pytest.raises(ValueError, match="answer: the answer holds more than"):
        _guard(flood)
