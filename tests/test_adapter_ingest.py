"""Trace-format files in the landing folder: detected by their first line, converted as a whole once
settled, each call landing as a citegate-log/1 record with the source line that holds it, every bad line and
unconvertible call a reject row, every file's ledger row balanced, nothing twice.

The adapter here is a test-only format ("toy"), so the plumbing is tested apart from the four real adapters:
a line is a retriever span, an LLM span, or a batch of spans (several calls on one line); a call's chunks come
from the retriever spans of its trace anywhere in the file (pairing needs the whole file).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from citegate_assets.cli import main
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest import adapters
from citegate_assets.lib.ingest.adapters import AdapterSettings, Call, LineReject
from citegate_assets.lib.ingest.landing import days_in_landing, is_log_name, is_trace_name
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.storage.warehouse import query

from .helpers import CHUNKS, render_prompt, scenario_record

NOW = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)
DAY = "2026-11-02T10:00:00Z"


class ToyAdapter:
    """A test-only trace format: {"toy": "llm" | "retriever" | "batch", ...} per line."""

    name = "toy"

    def detect(self, first_line: bytes) -> bool:
        try:
            obj = json.loads(first_line)
        except ValueError:
            return False
        return isinstance(obj, dict) and "toy" in obj

    def convert(self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings) -> Iterator[Call | LineReject]:
        spans: list[tuple[int, dict]] = []
        for no, raw in lines:
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                yield LineReject(no, "invalid_json", str(exc)[:100])
                continue
            if not isinstance(obj, dict) or "toy" not in obj:
                yield LineReject(no, "not_of_format", "not a toy span")
                continue
            for span in obj["spans"] if obj["toy"] == "batch" else [obj]:
                spans.append((no, span))
        docs: dict[str, list[dict]] = {}
        for _, span in spans:
            if span["toy"] == "retriever":
                docs.setdefault(span["trace"], []).extend(span["docs"])
        for no, span in spans:
            if span["toy"] != "llm":
                continue
            if span["prompt"] == "__REDACTED__":
                yield Call(no, span["id"], None, "content_redacted", "the prompt was redacted by the tracer")
                continue
            record = {
                "request_id": span["id"],
                "logged_at": span["start"],
                "surface": span.get("attrs", {}).get(settings.surface_key, settings.default_surface),
                "answer_model": "toy-model",
                "prompt": span["prompt"],
                "prompt_encoding": "text",
                "template": "plain-list",
                "retrieved": [
                    {"chunk_id": d["id"], "rank": i, "text": d["text"]}
                    for i, d in enumerate(docs.get(span["trace"], []), 1)
                ],
                "answer": "An answer.",
                "citations": span["citations"],
            }
            if span.get("rebuilt"):
                record["prompt_reconstructed"] = True
            yield Call(no, span["id"], record)


class BrokenAdapter(ToyAdapter):
    name = "broken"

    def detect(self, first_line: bytes) -> bool:
        return b'"broken"' in first_line

    def convert(self, lines, settings):
        raise RuntimeError("cannot read this")


@pytest.fixture(autouse=True)
def toy():
    adapters.register(ToyAdapter())
    adapters.register(BrokenAdapter())
    yield
    adapters.unregister("toy")
    adapters.unregister("broken")


CITATION = {"chunk_id": "kb-1#c1", "span": "Refunds take 3-5 business days.", "claim": "Refunds are fast."}
MISMATCH = {**CITATION, "location_mismatch": "cited_text is not at char 10-40 of document 0"}


def retriever(trace: str) -> dict:
    return {"toy": "retriever", "trace": trace, "docs": [{"id": cid, "text": text} for cid, text in CHUNKS.items()]}


def llm(rid: str, trace: str, **extra) -> dict:
    return {
        "toy": "llm",
        "trace": trace,
        "id": rid,
        "start": DAY,
        "attrs": {"surface": "help"},
        "prompt": render_prompt("plain-list", "text"),
        "citations": [CITATION],
        **extra,
    }


def trace_file() -> list[str]:
    """Seven source lines: two calls paired with a retriever written after them, a batch of two calls on one
    line, a redacted call, a line that is not JSON and a JSON line of another shape."""
    return [
        json.dumps(llm("c1", "t1", rebuilt=True, citations=[MISMATCH])),  # 1: call, its retriever comes later
        json.dumps(retriever("t1")),  # 2: only spans
        json.dumps({"toy": "batch", "spans": [llm("c2", "t2"), llm("c3", "t2"), retriever("t2")]}),  # 3: two calls
        json.dumps(llm("c4", "t3", prompt="__REDACTED__")),  # 4: a call that cannot be converted
        '{"toy": "llm", "trace": ',  # 5: not JSON
        json.dumps({"something": "else"}),  # 6: not of the format
        json.dumps(llm("c5", "t1")),  # 7: call
    ]


def write(path, lines: list[str], *, end: str = "\n") -> None:
    path.write_text("\n".join(lines) + end, encoding="utf-8")


def settled(path) -> None:
    old = time.time() - 3600
    os.utime(path, (old, old))


def rows(con, sql: str) -> list[tuple]:
    return con.sql(sql).fetchall()


def counts(con) -> dict:
    tables = ["prompts", "retrievals", "citations", "ingest_rejects", "answer_rejects", "ingested_files"]
    return {t: rows(con, f"select count(*) from {t}")[0][0] for t in tables}


def ledger(con) -> list[tuple]:
    return rows(
        con,
        "select file_name, status, lines_read, records_ingested, records_rejected, detail from ingested_files "
        "order by file_name",
    )


def balanced(con) -> bool:
    return query(con, "ingest/unbalanced_files").fetchall() == []


# -- detection --------------------------------------------------------------------------------------------------


def test_detection_by_first_line():
    for first in (json.dumps(llm("c1", "t1")).encode(), b"\xef\xbb\xbf" + json.dumps(retriever("t")).encode()):
        found = adapters.detect(first)
        assert found is not None and found.name == "toy"
    # a citegate-log/1 line is never an adapter format, even if an adapter would claim it
    line = scenario_record("plain-list", "text")
    line["toy"] = "llm"
    assert adapters.detect(json.dumps(line).encode()) is None
    assert adapters.detect(b"not json") is None
    assert adapters.detect(b"") is None


def test_registry_imports_the_built_in_formats_by_name_and_survives_a_missing_one():
    names = set(adapters.registry()) | set(adapters.unavailable())
    assert set(adapters.FORMATS) <= names  # each is either usable or says why not
    with pytest.raises(ValueError, match="no adapter for format 'nope'"):
        adapters.adapter("nope")


# -- a converted file -------------------------------------------------------------------------------------------


def test_a_trace_file_lands_as_records_with_its_source_lines(con, landing, config):
    write(landing / "traces.jsonl", trace_file())
    summary = ingest_landing(con, landing, config, now=NOW, final=True)
    assert rows(con, "select request_id, surface, source_file, source_line from prompts order by request_id") == [
        ("c1", "help", "traces.jsonl", 1),
        ("c2", "help", "traces.jsonl", 3),
        ("c3", "help", "traces.jsonl", 3),
        ("c5", "help", "traces.jsonl", 7),
    ]
    # c1's retriever was written after it: pairing used the whole file
    assert rows(con, "select count(*) from retrievals where request_id = 'c1'") == [(len(CHUNKS),)]
    assert rows(con, "select request_id, prompt_reconstructed from prompts order by request_id") == [
        ("c1", True),
        ("c2", False),
        ("c3", False),
        ("c5", False),
    ]
    assert rows(con, "select citation_id, location_mismatch from citations order by citation_id") == [
        ("c1#0", MISMATCH["location_mismatch"]),
        ("c2#0", None),
        ("c3#0", None),
        ("c5#0", None),
    ]
    assert rows(con, "select source_file, line_no, request_id, reason from ingest_rejects order by line_no") == [
        ("traces.jsonl", 4, "c4", "content_redacted"),
        ("traces.jsonl", 5, None, "invalid_json"),
        ("traces.jsonl", 6, None, "not_of_format"),
    ]
    [(raw,)] = rows(con, "select raw_line from ingest_rejects where line_no = 5")
    assert raw == '{"toy": "llm", "trace": '
    # items: 5 calls + 2 line rejects = 4 ingested + 3 rejected; the detail accounts for every source line
    [(name, status, items, ingested, rejected, detail)] = ledger(con)
    assert (name, status, items, ingested, rejected) == ("traces.jsonl", "complete", 7, 4, 3)
    assert detail == "toy: 7 source lines (4 hold calls, 1 hold no call, 2 rejected); 5 calls"
    assert balanced(con)
    assert (summary.trace_files, summary.calls_converted, summary.lines_read) == (1, 7, 7)
    assert (summary.records_ingested, summary.records_rejected) == (4, 3)
    assert summary.days == {date(2026, 11, 2)}
    # the weekly metrics' metadata: prompts rebuilt from captured messages, per surface
    assert query(con, "metric_tables/reconstructed_prompts").fetchall() == [("help", 4, 1)]


def test_landing_names():
    for name in ("a.jsonl", "a.json", "a.json.gz", "a.json.1", "a.json-20261130.gz", "a.jsonl.2.gz"):
        assert is_log_name(name), name
    assert [n for n in ("a.json", "a.json.gz", "a.json.3", "a.jsonl", "a.jsonl.gz") if is_trace_name(n)] == [
        "a.json",
        "a.json.gz",
        "a.json.3",
    ]
    assert not is_log_name("a.txt") and not is_log_name("a.json.bak") and not is_log_name("a.ndjson")


def test_a_rerun_adds_nothing_and_a_touch_adds_nothing(con, landing, config):
    path = landing / "traces.jsonl"
    write(path, trace_file())
    ingest_landing(con, landing, config, now=NOW, final=True)
    before = counts(con)
    again = ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con) == before and again.calls_converted == 0
    os.utime(path, (time.time(), time.time()))
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con) == before
    path.rename(landing / "traces.jsonl.1")  # rotated: the same file under its new name
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con) == before
    assert [r[:2] for r in ledger(con)] == [("traces.jsonl.1", "complete")]


def test_a_file_that_grows_gives_only_its_new_calls(con, landing, config):
    path = landing / "traces.jsonl"
    write(path, trace_file())
    ingest_landing(con, landing, config, now=NOW, final=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(llm("c6", "t1")) + "\n" + "garbage\n")
    summary = ingest_landing(con, landing, config, now=NOW, final=True)
    assert (summary.calls_converted, summary.records_ingested, summary.records_rejected) == (2, 1, 1)
    assert rows(con, "select request_id, source_line from prompts where request_id = 'c6'") == [("c6", 8)]
    # the calls converted before are skipped, not reported as duplicates
    assert rows(con, "select reason, line_no from ingest_rejects where line_no > 7") == [("invalid_json", 9)]
    assert rows(con, "select count(*) from ingest_rejects where reason like 'duplicate%'") == [(0,)]
    [(_, status, items, ingested, rejected, detail)] = ledger(con)
    assert (status, items, ingested, rejected) == ("complete", 9, 5, 4)
    assert detail.startswith("toy: 9 source lines (5 hold calls")
    assert balanced(con)


def test_a_file_still_being_written_waits_until_it_settles(con, landing):
    config = parse_config({"ingest": {"settle_seconds": 3600}}, None)
    path = landing / "traces.jsonl"
    write(path, trace_file()[:1])  # the call is there, its retriever not yet
    summary = ingest_landing(con, landing, config, now=NOW)
    assert summary.files_waiting == 1 and summary.records_ingested == 0
    assert counts(con)["prompts"] == 0
    [(_, status, items, *_)] = ledger(con)
    assert (status, items) == ("waiting", 0)
    write(path, trace_file())
    settled(path)
    summary = ingest_landing(con, landing, config, now=NOW)
    assert summary.records_ingested == 4
    assert rows(con, "select count(*) from retrievals where request_id = 'c1'") == [(len(CHUNKS),)]
    assert [r[:2] for r in ledger(con)] == [("traces.jsonl", "complete")]
    # grown again but not settled: what was converted stays, the new part waits
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(llm("c6", "t1")) + "\n")
    summary = ingest_landing(con, landing, config, now=NOW)
    assert summary.files_waiting == 1 and summary.records_ingested == 0
    [(_, status, items, ingested, rejected, _)] = ledger(con)
    assert (status, items, ingested, rejected) == ("waiting", 7, 4, 3)
    summary = ingest_landing(con, landing, config, now=NOW, final=True)
    assert summary.records_ingested == 1
    assert balanced(con)


def test_the_size_limit_rejects_the_whole_file_once(con, landing):
    config = parse_config({"adapters": {"max_file_bytes": 2048}}, None)
    write(landing / "traces.jsonl", trace_file())
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con)["prompts"] == 0
    [(reason, line_no, detail)] = rows(con, "select reason, line_no, detail from ingest_rejects")
    assert (reason, line_no) == ("trace_file_too_large", 0)
    assert "[adapters].max_file_bytes" in detail
    assert [r[:2] for r in ledger(con)] == [("traces.jsonl", "failed")]
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con)["ingest_rejects"] == 1  # reported once while it stays so
    assert balanced(con)


def test_an_adapter_that_fails_fails_its_file_loudly(con, landing, config):
    write(landing / "b.jsonl", [json.dumps({"broken": 1})])
    ingest_landing(con, landing, config, now=NOW, final=True)
    [(reason, detail)] = rows(con, "select reason, detail from ingest_rejects")
    assert reason == "adapter_failed" and "RuntimeError: cannot read this" in detail


def test_json_names_gzip_and_one_pretty_printed_document(con, landing, config):
    # a batch span as one pretty-printed JSON document in a .json file: one line, numbered 1
    doc = {"toy": "batch", "spans": [retriever("t9"), llm("d1", "t9")]}
    (landing / "page.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    with gzip.open(landing / "export.json.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(retriever("t8")) + "\n" + json.dumps(llm("g1", "t8")) + "\n")
    (landing / "settings.json").write_text('{\n  "theme": "dark"\n}\n')
    write(landing / "log.jsonl", [json.dumps(scenario_record("plain-list", "text", request_id="plain-1"))])
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert rows(con, "select request_id, source_file, source_line from prompts order by request_id") == [
        ("d1", "page.json", 1),
        ("g1", "export.json.gz", 2),
        ("plain-1", "log.jsonl", 1),
    ]
    assert rows(con, "select source_file, line_no, reason from ingest_rejects") == [
        ("settings.json", 0, "unknown_trace_format")
    ]
    assert balanced(con)
    before = counts(con)
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con) == before


def test_a_call_already_ingested_from_another_file_is_a_duplicate(con, landing, config):
    write(landing / "a.jsonl", trace_file())
    write(landing / "b.jsonl", [json.dumps(retriever("t1")), json.dumps(llm("c1", "t1"))])
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert rows(con, "select source_file, line_no, reason from ingest_rejects where source_file = 'b.jsonl'") == [
        ("b.jsonl", 2, "duplicate_request_id")
    ]
    assert balanced(con)


def test_a_crash_mid_file_resumes_without_duplicates(con, landing, config, monkeypatch):
    from citegate_assets.lib.ingest import writer as ingest_writer

    write(landing / "traces.jsonl", trace_file())
    calls = {"n": 0}
    real = ingest_writer._write_batch

    def dies_on_second_batch(*args):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk gone")
        return real(*args)

    monkeypatch.setattr(ingest_writer, "_write_batch", dies_on_second_batch)
    with pytest.raises(ingest_writer.IngestWriteError):
        ingest_landing(con, landing, config, now=NOW, final=True, batch_lines=3)
    monkeypatch.setattr(ingest_writer, "_write_batch", real)
    [(_, status, items, *_)] = ledger(con)
    assert (status, items) == ("partial", 3)
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con)["prompts"] == 4
    assert rows(con, "select count(*) from ingest_rejects") == [(3,)]
    assert [r[1:5] for r in ledger(con)] == [("complete", 7, 4, 3)]
    assert balanced(con)


def test_days_in_landing_reads_trace_files(landing):
    write(landing / "traces.jsonl", trace_file())
    assert days_in_landing(landing, now=NOW) == {date(2026, 11, 2)}


# -- the two optional fields, by hand in citegate-log/1 -----------------------------------------------------------


def test_optional_fields_in_a_citegate_log_line(con, landing, config):
    ok = scenario_record("plain-list", "text", request_id="ok")
    ok["prompt_reconstructed"] = True
    ok["citations"] = [MISMATCH]
    bad_flag = scenario_record("plain-list", "text", request_id="bad-flag")
    bad_flag["prompt_reconstructed"] = "yes"
    bad_mismatch = scenario_record("plain-list", "text", request_id="bad-mismatch")
    bad_mismatch["citations"] = [{**CITATION, "location_mismatch": 3}]
    write(landing / "a.jsonl", [json.dumps(r) for r in (ok, bad_flag, bad_mismatch)])
    ingest_landing(con, landing, config, now=NOW)
    assert rows(con, "select request_id, prompt_reconstructed from prompts order by 1") == [
        ("bad-mismatch", False),
        ("ok", True),
    ]
    assert rows(con, "select location_mismatch from citations") == [(MISMATCH["location_mismatch"],)]
    assert rows(con, "select line_no, reason from ingest_rejects") == [(2, "wrong_type")]
    assert rows(con, "select request_id, reason from answer_rejects") == [("bad-mismatch", "citation_wrong_type")]


# -- citegate import ----------------------------------------------------------------------------------------------


def test_import_writes_citegate_log_lines_and_prints_the_rejects(tmp_path, capsys):
    source = tmp_path / "traces.jsonl"
    write(source, trace_file())
    out = tmp_path / "out"
    code = main(["import", "--from", "toy", str(source), "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 1  # something was rejected
    written = (out / "traces.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["request_id"] for line in written] == ["c1", "c2", "c3", "c5"]
    assert json.loads(written[0])["prompt_reconstructed"] is True
    assert "traces.jsonl:4: content_redacted" in printed.err
    assert "traces.jsonl:5: invalid_json" in printed.err
    assert "4 calls written" in printed.out
    # the written file is a citegate-log/1 file like any other
    assert adapters.detect(written[0].encode()) is None


def test_import_refuses_a_file_of_another_format(tmp_path, capsys):
    source = tmp_path / "log.jsonl"
    write(source, [json.dumps({"broken": 1})])
    code = main(["import", "--from", "toy", str(source), "--out", str(tmp_path / "out")])
    assert code == 2
    assert "not toy" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_import_of_a_real_fixture_never_imports_dagster(tmp_path):
    """`citegate import` is a reader: a fresh interpreter converts a committed fixture without loading Dagster."""
    fixture = Path(__file__).parent / "fixtures" / "adapters" / "anthropic" / "exchanges.jsonl"
    if not fixture.exists() or "anthropic" not in adapters.registry():
        pytest.skip("the anthropic adapter or its fixture is not in this tree yet")
    runner = (
        "import sys\n"
        "from citegate_assets.cli import main\n"
        "code = main(sys.argv[1:])\n"
        "print('dagster imported:', 'dagster' in sys.modules, file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", runner, "import", "--from", "anthropic", str(fixture), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "dagster imported: False" in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stderr
    written = (tmp_path / "exchanges.jsonl").read_text(encoding="utf-8").splitlines()
    assert written and all(adapters.detect(line.encode()) is None for line in written)  # citegate-log/1 lines


def test_a_trace_file_rewritten_in_place_is_reported_once_and_not_reread(con, landing, config):
    path = landing / "traces.jsonl"
    write(path, trace_file())
    ingest_landing(con, landing, config, now=NOW, final=True)
    lines = trace_file()
    lines[1] = json.dumps(retriever("t1-changed"))  # same first line, different bytes after it
    write(path, lines + [json.dumps(llm("c9", "t1"))])
    for _ in range(2):
        ingest_landing(con, landing, config, now=NOW, final=True)
    assert rows(con, "select reason from ingest_rejects where line_no = 0") == [("file_changed_after_ingest",)]
    assert rows(con, "select count(*) from prompts where request_id = 'c9'") == [(0,)]
    assert balanced(con)


def test_a_copy_under_a_second_name_in_the_same_run_adds_nothing(con, landing, config):
    write(landing / "a.jsonl", trace_file())
    write(landing / "b.jsonl", trace_file())
    ingest_landing(con, landing, config, now=NOW, final=True)
    assert counts(con)["prompts"] == 4
    assert rows(con, "select count(*) from ingest_rejects where reason like 'duplicate%'") == [(0,)]
    assert balanced(con)


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"retrieved_left_out": [{"chunk_id": "kb-1"}]}, "wrong_type"),
        ({"retrieved_left_out": "kb-1"}, "wrong_type"),
        ({"retrieved": [{"chunk_id": "kb-1", "text": "t", "text_source": "guess"}]}, "invalid_retrieved"),
    ],
)
def test_what_an_adapter_could_not_recover_is_validated_like_any_field(change, reason):
    from citegate_assets.lib.ingest.records import Reject, parse_record

    record = {**scenario_record("plain-list", "text"), **change}
    got = parse_record(record, datetime(2026, 11, 20, tzinfo=UTC))
    assert isinstance(got, Reject) and got.reason == reason


def test_what_an_adapter_could_not_recover_is_kept():
    from citegate_assets.lib.ingest.records import Record, parse_record

    base = scenario_record("plain-list", "text")
    retrieved = [{**base["retrieved"][0], "text_source": "prompt"}, *base["retrieved"][1:]]
    left_out = [{"chunk_id": "kb-9", "why": "no text in the trace and not found in the prompt"}]
    record = {**base, "retrieved": retrieved, "retrieved_left_out": left_out}
    got = parse_record(record, datetime(2026, 11, 20, tzinfo=UTC))
    assert isinstance(got, Record)
    assert [r["text_source"] for r in got.retrieved] == ["prompt"] + [None] * (len(retrieved) - 1)
    assert json.loads(got.retrieved_left_out or "") == left_out
