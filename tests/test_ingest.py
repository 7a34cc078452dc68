"""Ingest: bad input becomes a reject row with a reason, every good record beside it lands, nothing twice."""

import copy
import gzip
import json
import shutil

import pytest

from citegate_assets.lib.ingest.stream import ingest_landing

from .helpers import RAW_TEXT, as_schema_11, scenario_record, write_jsonl


def good(i: int, **changes) -> dict:
    record = scenario_record("plain-list", "text", request_id=f"req-{i}")
    record.update(changes)
    return record


def table_counts(con) -> dict:
    tables = [
        "prompts",
        "prompt_sections",
        "retrievals",
        "citations",
        "ingest_rejects",
        "answer_rejects",
        "prompt_conflicts",
        "ingested_files",
    ]
    return {t: con.sql(f"select count(*) from {t}").fetchall()[0][0] for t in tables}


def rejects(con) -> list[tuple]:
    return con.sql("select source_file, line_no, reason from ingest_rejects order by source_file, line_no").fetchall()


BAD_LINES = [
    ('{"request_id": "x", "logged_at": ', "invalid_json"),
    ("[1, 2, 3]", "not_an_object"),
    ("", "empty_line"),
]


@pytest.mark.parametrize("raw,reason", BAD_LINES)
def test_bad_line_is_rejected_and_neighbours_land(raw, reason, con, landing, config):
    (landing / "a.jsonl").write_text(json.dumps(good(1)) + "\n" + raw + "\n" + json.dumps(good(2)) + "\n")
    summary = ingest_landing(con, landing, config)
    assert rejects(con) == [("a.jsonl", 2, reason)]
    assert (summary.lines_read, summary.records_ingested, summary.records_rejected) == (3, 2, 1)
    [(raw_kept,)] = con.sql("select raw_line from ingest_rejects").fetchall()
    assert raw_kept == raw


def _without(field):
    record = good(9)
    del record[field]
    return record


@pytest.mark.parametrize(
    "record,reason,detail",
    [
        (_without("request_id"), "missing_field", "request_id"),
        (_without("prompt"), "missing_field", "prompt"),
        (_without("retrieved"), "missing_field", "retrieved"),
        (good(9, surface=None), "missing_field", "surface"),
        (good(9, prompt=12), "wrong_type", "prompt"),
        (good(9, retrieved="kb-1#c1"), "wrong_type", "retrieved"),
        (good(9, request_id="  "), "empty_request_id", "request_id"),
        (good(9, logged_at="yesterday"), "invalid_timestamp", "logged_at"),
        (good(9, logged_at="2026-11-02T10:00:00"), "timestamp_without_timezone", "no UTC offset"),
        (good(9, logged_at="2099-01-01T00:00:00Z"), "timestamp_out_of_range", "future"),
        (good(9, prompt_encoding="yaml"), "unknown_prompt_encoding", "yaml"),
        (good(9, prompt_encoding="json"), "prompt_undecodable", "not valid JSON"),
        (good(9, retrieved=[{"rank": 1, "text": "t"}]), "invalid_retrieved", "chunk_id"),
        (
            good(9, retrieved=[{"chunk_id": "a", "rank": 1, "text": "t"}, {"chunk_id": "a", "rank": 2, "text": "u"}]),
            "duplicate_chunk_id",
            "'a'",
        ),
    ],
)
def test_bad_record_is_rejected_with_reason(record, reason, detail, con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1), record, good(2)])
    ingest_landing(con, landing, config)
    [(line_no, got, got_detail)] = con.sql("select line_no, reason, detail from ingest_rejects").fetchall()
    assert (line_no, got) == (2, reason)
    assert detail in got_detail
    assert con.sql("select request_id from prompts order by 1").fetchall() == [("req-1",), ("req-2",)]


def test_a_rejected_line_carries_the_request_id_it_names(con, landing, config):
    """A line whose JSON parsed keeps its request id on the reject row (forget finds it by it) when a valid record
    could have that id: a string, not blank, that is text. Nothing else names a request."""
    lines = [
        (json.dumps(good(9, logged_at="2026-11-02T10:00:00")), "timestamp_without_timezone", "req-9"),
        (json.dumps(_without("prompt")), "missing_field", "req-9"),
        (json.dumps(good(9, prompt_encoding="yaml")), "unknown_prompt_encoding", "req-9"),
        (json.dumps(good(9, retrieved=[{"rank": 1, "text": "t"}])), "invalid_retrieved", "req-9"),
        (json.dumps(good(9, prompt="\ud800 lone")), "invalid_unicode", "req-9"),  # ensure_ascii: the escape
        (json.dumps(good(9, request_id="\ud800")), "invalid_unicode", None),  # no column can hold it
        (json.dumps(good(9, request_id=12)), "wrong_type", None),
        (json.dumps(good(9, request_id=" \t")), "empty_request_id", None),
        (json.dumps(_without("request_id")), "missing_field", None),
        ('{"request_id": "req-9", "logged_at": ', "invalid_json", None),  # never parsed: names nothing
    ]
    (landing / "a.jsonl").write_text("".join(line + "\n" for line, _, _ in lines))
    ingest_landing(con, landing, config)
    got = con.sql("select line_no, reason, request_id from ingest_rejects order by line_no").fetchall()
    assert got == [(i, reason, rid) for i, (_, reason, rid) in enumerate(lines, 1)]


@pytest.mark.parametrize(
    "citations,reason",
    [
        ("not json at all", "citations_not_json"),
        ('{"chunk_id": "kb-1#c1"}', "citations_not_list"),
        ({"chunk_id": "kb-1#c1"}, "citations_not_list"),
        (["kb-1#c1"], "citation_not_object"),
        ([{"chunk_id": "kb-1#c1", "span": "x"}], "citation_missing_key"),
        ([{"chunk_id": "kb-1#c1", "span": "", "claim": "c"}], "citation_empty_field"),
        ([{"chunk_id": "kb-1#c1", "span": "\u200b \u00a0", "claim": "c"}], "citation_empty_field"),
        ([{"chunk_id": " ", "span": "s", "claim": "c"}], "citation_empty_field"),
    ],
)
def test_unparseable_citations_reject_the_answer_not_the_prompt(citations, reason, con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1), good(2, citations=citations)])
    ingest_landing(con, landing, config)
    assert con.sql("select request_id, reason from answer_rejects").fetchall() == [("req-2", reason)]
    assert con.sql("select count(*) from prompts").fetchall() == [(2,)]  # the prompt is still stored
    assert con.sql("select distinct request_id from citations").fetchall() == [("req-1",)]
    assert rejects(con) == []


def test_citations_as_json_string_are_accepted(con, landing, config):
    record = good(1)
    record["citations"] = json.dumps(record["citations"])
    write_jsonl(landing / "a.jsonl", [record])
    ingest_landing(con, landing, config)
    assert con.sql("select count(*) from citations").fetchall() == [(8,)]


def test_duplicate_request_ids_same_and_different_prompt(con, landing, config):
    first = good(1)
    same = copy.deepcopy(first)
    different = good(1, prompt=first["prompt"] + " (edited)")
    write_jsonl(landing / "a.jsonl", [first, same])
    write_jsonl(landing / "b.jsonl", [different])
    summary = ingest_landing(con, landing, config)
    assert rejects(con) == [("a.jsonl", 2, "duplicate_request_id"), ("b.jsonl", 1, "request_id_conflict")]
    assert summary.records_ingested == 1
    [(kept,)] = con.sql("select prompt_raw from prompts").fetchall()
    assert kept == first["prompt"]  # the first one is never replaced
    [(rid, source, line)] = con.sql("select request_id, source_file, source_line from prompt_conflicts").fetchall()
    assert (rid, source, line) == ("req-1", "b.jsonl", 1)
    assert con.sql("select existing_source from prompt_conflicts").fetchall() == [("a.jsonl:1",)]


def test_ids_ingested_by_an_earlier_run_are_refused_with_their_source(con, landing, config):
    """A later run finds the ids of history through the hashes it reads once (lib/ingest/known_requests.py), whatever
    their place in the sorted hashes: first, last or between; fresh ids beside them land."""
    history = [good(i) for i in range(1, 41)]
    write_jsonl(landing / "a.jsonl", history)
    assert ingest_landing(con, landing, config).records_ingested == 40
    hashes = sorted((h, rid) for rid, h in con.sql("select request_id, hash(request_id) from prompt_rows").fetchall())
    lowest, middle, highest = hashes[0][1], hashes[20][1], hashes[-1][1]
    by_id = {r["request_id"]: r for r in history}
    again = [
        copy.deepcopy(by_id[lowest]),
        good(100),
        copy.deepcopy(by_id[highest]),
        {**copy.deepcopy(by_id[middle]), "prompt": by_id[middle]["prompt"] + " (edited)"},
        good(101),
    ]
    write_jsonl(landing / "b.jsonl", again)
    summary = ingest_landing(con, landing, config)
    assert summary.records_ingested == 2
    assert rejects(con) == [
        ("b.jsonl", 1, "duplicate_request_id"),
        ("b.jsonl", 3, "duplicate_request_id"),
        ("b.jsonl", 4, "request_id_conflict"),
    ]
    assert con.sql("select request_id, existing_source from prompt_conflicts").fetchall() == [
        (middle, f"a.jsonl:{history.index(by_id[middle]) + 1}")
    ]
    assert con.sql("select count(*) from prompt_rows").fetchall() == [(42,)]


def test_gzip_file_and_empty_file(con, landing, config):
    with gzip.open(landing / "a.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(good(1)) + "\n" + json.dumps(good(2)))  # no trailing newline
    (landing / "b.jsonl").write_text("")
    summary = ingest_landing(con, landing, config, final=True)
    assert summary.records_ingested == 2
    ledger = dict(con.sql("select file_name, status from ingested_files").fetchall())
    assert ledger == {"a.jsonl.gz": "complete", "b.jsonl": "complete"}
    assert rejects(con) == []


def test_truncated_gzip_keeps_what_was_readable(con, landing, config):
    payload = gzip.compress(("\n".join(json.dumps(good(i)) for i in range(200)) + "\n").encode())
    (landing / "a.jsonl.gz").write_bytes(payload[: len(payload) // 2])
    summary = ingest_landing(con, landing, config, final=True)
    [(reason, detail)] = con.sql("select reason, detail from ingest_rejects").fetchall()
    assert reason == "file_unreadable" and "a.jsonl.gz" in detail
    assert 0 < summary.records_ingested < 200
    assert con.sql("select status from ingested_files").fetchall() == [("failed",)]


def test_rerun_changes_no_row_count(con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1), good(2)], raw_lines=["{broken"])
    ingest_landing(con, landing, config)
    before = table_counts(con)
    again = ingest_landing(con, landing, config)
    assert again.lines_read == 0
    assert table_counts(con) == before


def test_appended_file_resumes_after_the_lines_already_read(con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1)])
    ingest_landing(con, landing, config)
    with open(landing / "a.jsonl", "a") as fh:
        fh.write(json.dumps(good(2)) + "\n")
    summary = ingest_landing(con, landing, config)
    assert (summary.lines_read, summary.records_ingested, summary.records_rejected) == (1, 1, 0)
    assert con.sql("select lines_read, records_ingested from ingested_files").fetchall() == [(2, 2)]


def test_rewritten_file_is_reported_once_and_not_reread(con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1), good(2)])
    ingest_landing(con, landing, config)
    write_jsonl(landing / "a.jsonl", [good(1), good(3)])  # same first line, different bytes after it
    ingest_landing(con, landing, config)
    ingest_landing(con, landing, config)
    assert rejects(con) == [("a.jsonl", 0, "file_changed_after_ingest")]
    assert con.sql("select count(*) from prompts").fetchall() == [(2,)]


def test_a_new_file_under_an_old_name_is_read(con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1), good(2)])
    ingest_landing(con, landing, config)
    write_jsonl(landing / "a.jsonl", [good(3)])  # another file now carries the name
    ingest_landing(con, landing, config)
    assert rejects(con) == []
    assert con.sql("select request_id from prompts order by 1").fetchall() == [("req-1",), ("req-2",), ("req-3",)]


def test_non_log_entries_are_reported_once(con, landing, config):
    (landing / "notes.txt").write_text("hello")
    (landing / "sub.jsonl").mkdir()
    (landing / ".DS_Store").write_text("x")
    ingest_landing(con, landing, config)
    ingest_landing(con, landing, config)
    assert rejects(con) == [("notes.txt", 0, "not_a_log_file"), ("sub.jsonl", 0, "not_a_file")]


def test_lines_read_equal_ingested_plus_rejected(con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1), good(1), good(2, logged_at="bad")], raw_lines=["{", "", "[]"])
    ingest_landing(con, landing, config)
    [(read, ingested, rejected)] = con.sql(
        "select lines_read, records_ingested, records_rejected from ingested_files"
    ).fetchall()
    assert read == 6 and ingested + rejected == read
    assert con.sql("select count(*) from prompts").fetchall()[0][0] == ingested
    assert con.sql("select count(*) from ingest_rejects").fetchall()[0][0] == rejected


def test_batches_of_one_line_give_the_same_tables(tmp_path, landing, config):
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    write_jsonl(landing / "a.jsonl", [good(1), good(1), good(2), good(3, citations="x")], raw_lines=["{"])
    results = []
    for batch_lines, name in ((1, "one.duckdb"), (1000, "many.duckdb")):
        with connect(tmp_path / name) as c:
            ensure_schema(c)
            ingest_landing(c, landing, config, batch_lines=batch_lines)
            results.append(
                (table_counts(c), c.sql("select citation_id, span_normalized from citations order by 1").fetchall())
            )
    assert results[0] == results[1]


def test_unknown_template_keeps_prompt_and_rejects_answer(con, landing, config):
    write_jsonl(landing / "a.jsonl", [good(1, template="my-custom-template")])
    ingest_landing(con, landing, config)
    assert con.sql("select reason from answer_rejects").fetchall() == [("unknown_template",)]
    assert con.sql("select profile_status from prompts").fetchall() == [("unknown_template",)]


def test_bom_and_crlf_lines(con, landing, config):
    body = "\r\n".join(json.dumps(good(i)) for i in (1, 2)) + "\r\n"
    (landing / "a.jsonl").write_bytes(b"\xef\xbb\xbf" + body.encode())
    summary = ingest_landing(con, landing, config)
    assert (summary.records_ingested, summary.records_rejected) == (2, 0)


RETRIEVED_TEXT = (
    "select request_id, position, coalesce(r.text_normalized, "
    "substr(p.prompt_normalized, r.prompt_start + 1, r.prompt_end - r.prompt_start)) "
    "from retrievals r left join prompts p using (request_id, day) order by request_id, position"
)


def _ingest_generated(tmp_path, config, monkeypatch, once: bool):
    """The generated logs (every template, json/text/python_repr prompts, malformed lines) into a new warehouse."""
    from citegate_assets.lib.ingest import run_batches
    from citegate_assets.lib.loggen import generate_logs
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    landing = tmp_path / "generated"
    if not landing.exists():
        generate_logs(landing, days=1, requests_per_day=80, seed=5)
    monkeypatch.setattr(run_batches, "STORE_RETRIEVED_TEXT_ONCE", once)
    path = tmp_path / f"once-{once}.duckdb"
    with connect(path) as c:
        ensure_schema(c)
        ingest_landing(c, landing, config)
    return path


def test_each_retrieved_text_is_stored_once(tmp_path, config, monkeypatch):
    """Schemas 9 and 11: a retrieved text that stands whole in the prompt is not stored a second time, normalized or
    as logged; readers get it back from prompt_normalized and prompt_raw, identical to the text stored before."""
    from citegate_assets.lib.storage.warehouse import connect

    before = _ingest_generated(tmp_path, config, monkeypatch, once=False)
    after = _ingest_generated(tmp_path, config, monkeypatch, once=True)
    with connect(before, read_only=True) as old, connect(after, read_only=True) as new:
        assert new.sql(RETRIEVED_TEXT).fetchall() == old.sql(RETRIEVED_TEXT).fetchall()
        [(rows, once, stored_old)] = old.sql(
            "select count(*), count(*) filter (where text_normalized is null), sum(strlen(text_normalized)) "
            "from retrievals"
        ).fetchall()
        assert once == 0
        [(rows_new, once, stored_new, unlocated)] = new.sql(
            "select count(*), count(*) filter (where text_normalized is null), sum(strlen(text_normalized)), "
            "count(*) filter (where (text_normalized is null) <> (prompt_start is not null)) from retrievals"
        ).fetchall()
        assert (rows_new, unlocated) == (rows, 0)
        assert once > rows / 2 and stored_new < stored_old / 2  # most chunks reach their prompt whole
        # schema 11: the text as logged, where it stands verbatim in prompt_raw, is read back from there
        assert new.sql(RAW_TEXT).fetchall() == old.sql(RAW_TEXT).fetchall()
        [(in_raw, unplaced, raw_old)] = old.sql(
            "select count(*) filter (where raw_start is not null), count(*) filter (where text is null), "
            "sum(strlen(text)) from retrievals"
        ).fetchall()
        assert (in_raw, unplaced) == (0, 0)
        [(in_raw, escaped, unplaced, raw_new)] = new.sql(
            "select count(*) filter (where raw_start is not null), count(*) filter (where raw_encoding = 'json'), "
            "count(*) filter (where (text is null) <> (raw_start is not null)), sum(strlen(text)) from retrievals"
        ).fetchall()
        # the generated prompts are text, json and python_repr: a plain-text prompt holds the text verbatim, a JSON
        # one escaped (schema 13); only a python_repr prompt's texts stay stored
        assert in_raw > rows / 2 and escaped > rows / 5 and unplaced == 0 and raw_new < raw_old / 3
        kept = new.sql(
            "select p.prompt_raw, r.text from retrievals r join prompts p using (request_id, day) "
            "where r.text is not null and p.prompt_encoding in ('text', 'json')"
        ).fetchall()
        for raw, text in kept:  # a text still stored stands nowhere in its prompt, verbatim or escaped
            assert text not in raw
            assert json.dumps(text)[1:-1] not in raw and json.dumps(text, ensure_ascii=False)[1:-1] not in raw


def test_migration_9_stores_each_retrieved_text_once(tmp_path, config, monkeypatch):
    """sql/migrations/009 on a warehouse written the old way gives the rows the new ingest writes."""
    from citegate_assets.lib.storage.warehouse import connect, run_script, transaction

    before = _ingest_generated(tmp_path, config, monkeypatch, once=False)
    after = _ingest_generated(tmp_path, config, monkeypatch, once=True)
    layout = "select request_id, position, text_normalized, prompt_start, prompt_end from retrievals order by 1, 2"
    with connect(before) as old:
        # the table as schema 8 created it
        old.execute("alter table retrievals drop column prompt_start")
        old.execute("alter table retrievals drop column prompt_end")
        old.execute("alter table retrievals alter column text_normalized set not null")
        with transaction(old):
            run_script(old, "migrations/009_retrieved_text_once")
        migrated = old.sql(layout).fetchall()
        [(nullable,)] = old.sql(
            "select is_nullable from information_schema.columns "
            "where table_name = 'retrievals' and column_name = 'text_normalized'"
        ).fetchall()
    with connect(after, read_only=True) as new:
        assert migrated == new.sql(layout).fetchall()
    assert nullable == "YES"


def test_migration_11_keeps_the_text_of_earlier_rows(tmp_path, config, monkeypatch):
    """A schema 10 warehouse (retrieved text as logged stored in every row) is upgraded in place, nothing rewritten:
    its rows read back the same through the readers' coalesce."""
    from citegate_assets.lib.storage.warehouse import SCHEMA_VERSION, connect, ensure_schema

    reference = _ingest_generated(tmp_path, config, monkeypatch, once=False)
    path = tmp_path / "schema10.duckdb"
    path.write_bytes(reference.read_bytes())
    shutil.copytree(reference.with_name(f"{reference.stem}.text"), path.with_name(f"{path.stem}.text"))
    with connect(path) as con:
        as_schema_11(con)
        con.execute("alter table retrievals drop column raw_start")
        con.execute("alter table retrievals drop column raw_end")
        con.execute("alter table retrievals drop column raw_encoding")
        con.execute("delete from schema_version")
        con.execute("insert into schema_version values (10, now())")
    with connect(path) as con, connect(reference, read_only=True) as ref:
        ensure_schema(con)
        assert con.sql("select max(version) from schema_version").fetchall() == [(SCHEMA_VERSION,)] == [(18,)]
        assert con.sql(RAW_TEXT).fetchall() == ref.sql(RAW_TEXT).fetchall()
        assert con.sql("select count(*) from retrievals where raw_start is not null").fetchall() == [(0,)]
