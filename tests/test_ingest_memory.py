"""Ingest memory stays flat as files grow: DuckDB's pool is bounded while ingest runs, and a line as long as
[ingest].max_line_bytes allows still lands under that bound."""

import json

import duckdb

from citegate_assets.lib.ingest.known_requests import KnownRequests
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.ingest.writer import (
    INGEST_CHECKPOINT_BYTES,
    INGEST_MEMORY_LIMIT_BYTES,
    INGEST_THREADS,
    LONG_LINE_CHECKPOINT_BYTES,
)

from .helpers import scenario_record, write_jsonl


def memory_limit(con) -> str:
    [(limit,)] = con.sql("select current_setting('memory_limit')").fetchall()
    return limit


def checkpoint_threshold(con) -> str:
    [(threshold,)] = con.sql("select current_setting('checkpoint_threshold')").fetchall()
    return threshold


def threads(con) -> int:
    [(count,)] = con.sql("select current_setting('threads')").fetchall()
    return count


def test_the_memory_bound_holds_during_ingest_and_is_put_back(con, landing, config):
    """And the checkpoint threshold and DuckDB's threads: raised (fewer rewrites of the tables' last row groups) and
    one while ingest appends, the database's own afterwards."""
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text", request_id=f"req-{i}") for i in range(5)])
    con.execute("set threads = 3")
    before, threshold = memory_limit(con), checkpoint_threshold(con)
    during: list[tuple[str, str, int]] = []
    summary = ingest_landing(
        con,
        landing,
        config,
        batch_lines=2,
        progress=lambda *_: during.append((memory_limit(con), checkpoint_threshold(con), threads(con))),
    )
    assert summary.records_ingested == 5
    assert during and set(during) == {
        (f"{INGEST_MEMORY_LIMIT_BYTES / 2**20:.1f} MiB", f"{INGEST_CHECKPOINT_BYTES / 2**20:.1f} MiB", INGEST_THREADS)
    }
    assert (memory_limit(con), checkpoint_threshold(con)) == (before, threshold) == (before, "16.0 MiB")
    assert threads(con) == 3
    assert con.sql("select count(*) from prompts").fetchall() == [(5,)]


def test_the_memory_bound_is_put_back_when_the_warehouse_cannot_be_written(con, landing, config):
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text", request_id="req-1")])
    before, before_threads = memory_limit(con), threads(con)
    con.execute("drop table prompt_conflicts")  # the batch's insert fails inside the bounded block
    try:
        ingest_landing(con, landing, config)
    except Exception as exc:  # noqa: BLE001 — any failure: the bound must not outlive the run
        assert "prompt_conflicts" in str(exc)
    else:
        raise AssertionError("the insert into a dropped table did not fail")
    assert (memory_limit(con), checkpoint_threshold(con), threads(con)) == (before, "16.0 MiB", before_threads)


def test_a_line_near_max_line_bytes_lands_under_the_bound(con, landing, config):
    """A 12 MB chunk, in the prompt and retrieved (a 25 MB line): its batch gets room for it, then the bound is back."""
    record = scenario_record("plain-list", "text", request_id="req-long")
    chunk = " ".join(f"word{i % 9973} costs {i} units." for i in range(600_000))[: 12 * 2**20]
    old = record["retrieved"][0]["text"]
    record["prompt"] = record["prompt"].replace(old.replace("\n", " "), chunk)
    assert chunk in record["prompt"]
    record["retrieved"][0]["text"] = chunk
    (landing / "a.jsonl").write_text(json.dumps(record) + "\n")
    summary = ingest_landing(con, landing, config)
    assert (summary.records_ingested, summary.records_rejected) == (1, 0)
    [(prompt_chars, truncated, in_prompt, text_chars, stored)] = con.sql(
        "select strlen(p.prompt_raw), s.truncated, r.in_prompt, "
        "strlen(coalesce(r.text, substr(p.prompt_raw, r.raw_start + 1, r.raw_end - r.raw_start))), r.text "
        "from prompts p "
        "join prompt_sections s using (request_id) join retrievals r on r.request_id = s.request_id "
        "and r.chunk_id = s.chunk_id where s.chunk_id = 'kb-1#c1'"
    ).fetchall()
    assert prompt_chars > len(chunk) and text_chars == len(chunk)
    assert stored is None  # the chunk stands verbatim in the prompt: stored once (schema 11)
    assert (truncated, in_prompt) == (False, True)


def test_copies_of_a_line_near_max_line_bytes_are_refused_and_ingest_finishes(con, landing, config):
    """Each copy after the first is refused (duplicate_request_id) and its reject row keeps the whole line: a later,
    small commit's automatic checkpoint wrote those rows under the bare bound, failed, and DuckDB invalidated the
    database (a FATAL error, every later statement refused). No batch after a long line gets less room than it, and
    checkpoints come often enough that the refused copies held in memory fit that room."""
    record = scenario_record("plain-list", "text", request_id="req-long")
    line = json.dumps(record)
    record["prompt"] += " " * (32 * 2**20 - len(line) - 1)  # the line: max_line_bytes, newline included
    line = json.dumps(record)
    assert len(line) + 1 == 32 * 2**20
    copies = 6
    small = [json.dumps(scenario_record("plain-list", "text", request_id=f"req-{i}")) for i in range(copies)]
    (landing / "a.jsonl").write_text("".join(f"{s}\n{line}\n" for s in small))
    during: list[str] = []
    summary = ingest_landing(
        con, landing, config, batch_lines=2, progress=lambda *_: during.append(checkpoint_threshold(con))
    )
    assert (summary.records_ingested, summary.records_rejected) == (copies + 1, copies - 1)
    # from the first long line on, the uncheckpointed rows stay within the room that line gets
    assert during == [f"{LONG_LINE_CHECKPOINT_BYTES / 2**20:.1f} MiB"] * copies
    assert checkpoint_threshold(con) == "16.0 MiB"
    rows = con.sql("select reason, strlen(raw_line) from ingest_rejects order by line_no").fetchall()
    assert rows == [("duplicate_request_id", len(line))] * (copies - 1)
    assert con.sql("select count(*) from prompts").fetchall() == [(copies + 1,)]


def test_a_lookup_out_of_memory_while_a_batch_is_written_is_asked_again(con, landing, config, monkeypatch):
    """The lookup of a batch's request ids shares the memory_limit with the batch being written: refused for memory,
    it is asked again once that batch is in, and a copy of an id in the batch before is still refused."""
    lines = [scenario_record("plain-list", "text", request_id=f"req-{i}") for i in (0, 1, 2, 0)]
    write_jsonl(landing / "a.jsonl", lines)
    real = KnownRequests.lookup
    calls: list[int] = []

    def lookup(self, request_ids):
        calls.append(con.sql("select count(*) from prompts").fetchall()[0][0])
        if len(calls) == 2:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 1.0 MiB")
        return real(self, request_ids)

    monkeypatch.setattr(KnownRequests, "lookup", lookup)
    summary = ingest_landing(con, landing, config, batch_lines=2)
    assert (summary.records_ingested, summary.records_rejected) == (3, 1)
    assert calls[2] == 2  # asked again after the first batch's two prompts were committed
    assert con.sql("select reason from ingest_rejects").fetchall() == [("duplicate_request_id",)]
