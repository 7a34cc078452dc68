"""A corpus of bad input: every kind lands as exactly one reason row, the good lines around it land,
nothing raises, and every file's ledger balances (lines read = records ingested + records rejected,
which are also the rows actually in the tables).

Each case writes a landing folder: usually `a.jsonl` with four good lines around one bad line (line 3),
or a bad file beside a good file. (Cases that once exposed a product bug keep its description as a comment constant.)
with the bug in `reason`; their expectations are what docs/log-format.md specifies.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from citegate_assets.lib.config import parse_config
from citegate_assets.lib.ingest import workers as ingest_workers
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance
from citegate_assets.lib.storage.warehouse import connect, ensure_schema, query
from citegate_assets.lib.support.sampling import select_sample

from .helpers import CHUNKS, scenario_record

NOW = datetime(2026, 11, 3, 12, 0, tzinfo=UTC)  # ingest's clock: "the future" is after 2026-11-04T12:00Z
DAY = "2026-11-02T10:00:00Z"
DAY_START, DAY_END = date(2026, 11, 2), date(2026, 11, 3)
# the default policy differs from the built-in one, so a record that gets it is recognisable
CONFIG = parse_config(
    {
        "surfaces": {
            "default": {"stakes": "high", "template": "plain-list"},
            "billing": {"stakes": "off", "template": "anthropic-xml"},
        }
    },
    None,
)
FILE_REASONS = (
    "not_a_log_file",
    "not_a_file",
    "file_unreadable",
    "file_changed_after_ingest",
    "symlink_outside_landing",
    "decompressed_too_large",
)
TABLES = [
    "prompts",
    "prompt_sections",
    "retrievals",
    "citations",
    "ingest_rejects",
    "answer_rejects",
    "prompt_conflicts",
    "ingested_files",
]
DROP = object()  # a change that deletes the field
GOOD_IDS = ["good-1", "good-2", "good-3", "good-4"]


def good(i: int) -> dict:
    return scenario_record("plain-list", "text", request_id=f"good-{i}", logged_at=DAY)


def bad(case_id: str, **changes) -> dict:
    """A good record (request id `bad-<case id>`) with some fields changed or dropped."""
    record = scenario_record("plain-list", "text", request_id=f"bad-{case_id}", logged_at=DAY)
    for key, value in changes.items():
        if value is DROP:
            del record[key]
        else:
            record[key] = value
    return record


def with_retrieved(case_id: str, *entries: dict) -> dict:
    return bad(case_id, retrieved=[dict(e) for e in entries])


def with_citation(case_id: str, citation) -> dict:
    return bad(case_id, citations=[citation])


def encode(line) -> bytes:
    if isinstance(line, bytes):
        return line
    if isinstance(line, str):
        return line.encode("utf-8")
    return json.dumps(line).encode("ascii")  # \u-escapes keep even lone surrogates on the wire


def write_lines(path: Path, lines: list, *, final_newline: bool = True) -> None:
    data = b"\n".join(encode(x) for x in lines)
    path.write_bytes(data + (b"\n" if final_newline else b""))


def record_with_prompt_bytes(rid: str, size: int) -> bytes:
    """A valid record whose line is exactly `size` bytes long (newline excluded), built without a big str."""
    record = bad("x")
    record["request_id"], record["prompt"] = rid, "@@PROMPT@@"
    head, tail = json.dumps(record).encode().split(b"@@PROMPT@@")
    return head + b"x" * (size - len(head) - len(tail)) + tail


# ---------------------------------------------------------------------------------------------------
# The corpus


@dataclass
class Case:
    id: str
    write: Callable[[Path], None]
    rejects: list[
        tuple[str, int | None, tuple[str, ...]]
    ]  # ingest_rejects: (file, line or None = any, acceptable reasons)
    prompts: dict[str, list[str]]  # file -> request ids that must land, in line order
    answer_rejects: list[tuple[str, int, str]] = field(default_factory=list)
    conflicts: list[tuple[str, str, int, str]] = field(
        default_factory=list
    )  # (request_id, file, line, existing_source)
    check: Callable | None = None  # extra assertions on the warehouse
    bug: str | None = None  # xfail(strict) reason
    line: bytes | None = None  # the one bad line (line cases): reused by the all-in-one-file test
    lands: str | None = None  # request id of the bad line when its record is stored


CASES: list[Case] = []


def line_case(
    case_id: str,
    line,
    reason: str | tuple[str, ...] | None,
    *,
    answer: bool = False,
    lands: str | None = None,
    conflict: bool = False,
    check=None,
    bug=None,
) -> None:
    """a.jsonl = good-1, good-2, <bad line>, good-3, good-4. `reason` None: the line is not rejected at all."""
    raw = encode(line)
    if (answer or reason is None) and lands is None:
        lands = line["request_id"]
    rejects, answer_rejects = [], []
    if answer:
        answer_rejects = [("a.jsonl", 3, reason)]
    elif reason is not None:
        rejects = [("a.jsonl", 3, reason if isinstance(reason, tuple) else (reason,))]
    ids = ["good-1", "good-2", *([lands] if lands else []), "good-3", "good-4"]

    def write(landing: Path) -> None:
        write_lines(landing / "a.jsonl", [good(1), good(2), raw, good(3), good(4)])

    CASES.append(
        Case(
            case_id,
            write,
            rejects,
            {"a.jsonl": ids},
            answer_rejects,
            [("good-1", "a.jsonl", 3, "a.jsonl:1")] if conflict else [],
            check,
            bug,
            raw,
            lands,
        )
    )


def file_case(case_id: str, write, rejects, prompts, *, check=None, bug=None) -> None:
    CASES.append(
        Case(
            case_id,
            write,
            [(f, ln, r if isinstance(r, tuple) else (r,)) for f, ln, r in rejects],
            prompts,
            check=check,
            bug=bug,
        )
    )


def raw_line_of(con, reason: str) -> str:
    [(raw,)] = con.sql("select raw_line from ingest_rejects where reason = $r", params={"r": reason}).fetchall()
    return raw


# --- lines that are not JSON objects ---------------------------------------------------------------

line_case("invalid-json-python-dict", "{'request_id': 'single-quoted', 'prompt': 'x'}", "invalid_json")
line_case("invalid-json-trailing-garbage", json.dumps(bad("tg")) + " trailing", "invalid_json")
line_case("cut-mid-record", json.dumps(bad("cut"))[:200], "invalid_json")
_accented = json.dumps(bad("cut-utf8", prompt="Caf\u00e9 au lait"), ensure_ascii=False).encode("utf-8")
line_case(
    "cut-mid-utf8-character", _accented[: _accented.index("\u00e9".encode()) + 1], "invalid_utf8"
)  # a writer died mid-character
line_case("json-array-line", json.dumps([good(9)]), "not_an_object")
line_case("json-string-line", '"citegate-log/1"', "not_an_object")
line_case("json-null-line", "null", "not_an_object")
line_case("json-number-line", "42", "not_an_object")
line_case("blank-line-whitespace", " \t ", "empty_line")
line_case("blank-line-cr-only", "\r", "empty_line")
line_case("deeply-nested-lists", "[" * 100_000 + "]" * 100_000, "invalid_json")
line_case(
    "deeply-nested-inside-a-record",
    json.dumps(bad("deep", retrieved="@@")).replace('"@@"', "[" * 100_000 + "]" * 100_000),
    "invalid_json",
)
line_case("huge-integer", json.dumps(bad("int", retrieved="@@")).replace('"@@"', "9" * 5000), "invalid_json")

# --- bytes that are not text -------------------------------------------------------------------------

line_case(
    "nul-byte",
    json.dumps(bad("nul")).encode().replace(b"Answer using only", b"Answer\x00using only"),
    "nul_byte",
    check=lambda con: "\\x00" in raw_line_of(con, "nul_byte"),
)
line_case(
    "invalid-utf8",
    json.dumps(bad("utf8")).encode().replace(b"Answer using only", b"Answer \xff\xfe using only"),
    "invalid_utf8",
    check=lambda con: "\\xff\\xfe" in raw_line_of(con, "invalid_utf8"),
)
line_case(
    "utf8-encoded-surrogate",  # CESU-8 style: a surrogate code point encoded as three bytes is not UTF-8
    json.dumps(bad("cesu")).encode().replace(b"Answer using only", b"Answer \xed\xa0\x80 using only"),
    "invalid_utf8",
)
line_case(
    "overlong-utf8",
    json.dumps(bad("overlong")).encode().replace(b"Answer using only", b"Answer \xc0\xaf using only"),
    "invalid_utf8",
)
SURROGATE_BUG = (
    'BUG: a JSON \\u escape of a lone surrogate (e.g. "\\ud800") is valid JSON syntax and json.loads accepts it, '
    "but the str cannot be encoded as UTF-8: building the batch frames (polars) raises UnicodeEncodeError out of "
    "ingest_landing, so the whole batch is lost and every later run fails on the same file"
)
line_case(
    "lone-surrogate-in-prompt",
    bad("sur-prompt", prompt=good(0)["prompt"] + "\ud800"),
    ("invalid_unicode", "invalid_utf8", "invalid_json", "prompt_undecodable"),
)
line_case(
    "lone-surrogate-in-request-id",
    bad("sur-rid", request_id="req-\udc00"),
    ("invalid_unicode", "invalid_utf8", "invalid_json"),
)


def _big_line_check(con) -> None:
    raw = raw_line_of(con, "line_too_long")
    assert 0 < len(raw.encode()) <= 64 * 1024 and raw.startswith('{"request_id": "bad-too-long"')
    [(detail,)] = con.sql("select detail from ingest_rejects").fetchall()
    assert f"exceeds {32 * 1024 * 1024}" in detail


# decided from the code: MAX_LINE_BYTES is 32 MiB, so a 50 MB prompt is a `line_too_long` reject
line_case(
    "prompt-of-50-mb",
    record_with_prompt_bytes("bad-too-long", 50 * 1024 * 1024),
    "line_too_long",
    check=_big_line_check,
)
line_case(
    "line-of-exactly-32-mib",
    record_with_prompt_bytes("bad-32mib", 32 * 1024 * 1024),
    None,
    lands="bad-32mib",
)

# --- required fields: missing, null, wrong type --------------------------------------------------------

for f in ("request_id", "logged_at", "surface", "answer_model", "prompt", "retrieved"):
    line_case(f"missing-{f}", bad(f"missing-{f}", **{f: DROP}), "missing_field")
    line_case(f"null-{f}", bad(f"null-{f}", **{f: None}), "missing_field")
# citations absent or null: a valid call whose answer's inline markers are its citations (docs/log-format.md)
line_case("missing-citations", bad("missing-citations", citations=DROP), None)
line_case("null-citations", bad("null-citations", citations=None), None)

line_case("wrong-type-request-id-int", bad("wt-rid", request_id=12345), "wrong_type")
line_case("wrong-type-logged-at-epoch", bad("wt-ts", logged_at=1793613600), "wrong_type")
line_case("wrong-type-surface-list", bad("wt-surface", surface=["search"]), "wrong_type")
line_case("wrong-type-answer-model-bool", bad("wt-model", answer_model=True), "wrong_type")
line_case("wrong-type-prompt-object", bad("wt-prompt", prompt={"messages": []}), "wrong_type")
line_case("wrong-type-retrieved-object", bad("wt-retrieved", retrieved={"chunk_id": "kb-1#c1"}), "wrong_type")
line_case("wrong-type-prompt-encoding-int", bad("wt-enc", prompt_encoding=5), "wrong_type")
line_case("wrong-type-template-int", bad("wt-template", template=7), "wrong_type")
line_case("wrong-type-answer-list", bad("wt-answer", answer=["An", "answer"]), "wrong_type")
line_case(
    "wrong-type-prompt-encoding-false",
    bad("wt-enc-false", prompt_encoding=False),
    "wrong_type",
)
line_case("unknown-prompt-encoding", bad("enc", prompt_encoding="base64"), "unknown_prompt_encoding")

# --- request ids and timestamps ------------------------------------------------------------------------

line_case("empty-request-id", bad("empty-rid", request_id=""), "empty_request_id")
line_case("logged-at-not-rfc3339", bad("ts-words", logged_at="02/11/2026 10:00:00"), "invalid_timestamp")
line_case("logged-at-date-only", bad("ts-date", logged_at="2026-11-02"), "invalid_timestamp")
line_case("logged-at-bad-offset", bad("ts-offset", logged_at="2026-11-02T10:00:00+25:00"), "invalid_timestamp")
ISO_NOT_RFC_BUG = (
    "BUG: records._parse_timestamp uses datetime.fromisoformat, which in Python 3.11 accepts ISO 8601 forms that "
    "are not RFC 3339 (basic format '20261102T100000Z', week dates '2026-W45-1T10:00:00Z', hour-only "
    "'2026-11-02T10Z', no seconds '2026-11-02T10:00Z'); docs/log-format.md requires an RFC 3339 timestamp and lists "
    "invalid_timestamp for anything else, but these are ingested"
)
line_case("logged-at-iso-basic-format", bad("ts-basic", logged_at="20261102T100000Z"), "invalid_timestamp")
line_case("logged-at-iso-week-date", bad("ts-week", logged_at="2026-W45-1T10:00:00Z"), "invalid_timestamp")
line_case(
    "logged-at-rfc3339-lowercase-t-z",
    bad("ts-lower", logged_at="2026-11-02t10:00:00z"),
    None,
)
line_case("timestamp-without-timezone", bad("naive", logged_at="2026-11-02T10:00:00.250"), "timestamp_without_timezone")
line_case("timestamp-two-days-ahead", bad("ahead", logged_at="2026-11-05T12:00:00Z"), "timestamp_out_of_range")
line_case("timestamp-year-9999", bad("y9999", logged_at="9999-12-31T23:59:59Z"), "timestamp_out_of_range")
line_case("timestamp-before-2020", bad("y2019", logged_at="2019-12-31T23:59:59Z"), "timestamp_out_of_range")
line_case(
    "timestamp-before-2020-in-utc", bad("y2019-utc", logged_at="2020-01-01T00:30:00+01:00"), "timestamp_out_of_range"
)
OVERFLOW_BUG = (
    "BUG: records._parse_timestamp calls parsed.astimezone(timezone.utc) unguarded; a timestamp whose UTC instant "
    "falls outside datetime's range (9999-12-31T23:59:59-01:00, 0001-01-01T00:00:00+01:00) raises OverflowError "
    "out of ingest_landing instead of a timestamp_out_of_range reject, losing the batch and blocking every later run"
)
line_case(
    "timestamp-past-year-9999-in-utc", bad("y10000", logged_at="9999-12-31T23:59:59-01:00"), "timestamp_out_of_range"
)
line_case("timestamp-before-year-1-in-utc", bad("y0", logged_at="0001-01-01T00:00:00+01:00"), "timestamp_out_of_range")

# --- duplicates -----------------------------------------------------------------------------------------

line_case("duplicate-request-id-same-content", good(1), "duplicate_request_id")
_edited = good(1)
_edited["prompt"] += "\n(edited)"
line_case("duplicate-request-id-different-content", _edited, "request_id_conflict", conflict=True)


def _write_undecodable_then_valid(landing: Path) -> None:
    first = bad("twice", prompt_encoding="json", prompt="{not json")  # rejected: prompt_undecodable
    write_lines(landing / "a.jsonl", [good(1), good(2), first, bad("twice"), good(3), good(4)])


# an undecodable record must not claim its request id: the valid record with the same id after it is ingested
file_case(
    "undecodable-record-then-valid-record-same-id",
    _write_undecodable_then_valid,
    [("a.jsonl", 3, "prompt_undecodable")],
    {"a.jsonl": ["good-1", "good-2", "bad-twice", "good-3", "good-4"]},
)


def _write_undecodable_then_valid_in_next_file(landing: Path) -> None:
    write_lines(landing / "a.jsonl", [good(1), bad("twice", prompt_encoding="json", prompt="{not json")])
    write_lines(landing / "b.jsonl", [bad("twice"), good(2)])


file_case(
    "undecodable-record-then-valid-record-same-id-next-file",
    _write_undecodable_then_valid_in_next_file,
    [("a.jsonl", 2, "prompt_undecodable")],
    {"a.jsonl": ["good-1"], "b.jsonl": ["bad-twice", "good-2"]},
)

# --- retrieved -------------------------------------------------------------------------------------------

_r1 = {"chunk_id": "kb-1#c1", "rank": 1, "text": CHUNKS["kb-1#c1"]}
line_case("retrieved-missing-chunk-id", with_retrieved("r-noid", {"rank": 1, "text": "t"}), "invalid_retrieved")
line_case("retrieved-missing-text", with_retrieved("r-notext", {"chunk_id": "kb-1#c1", "rank": 1}), "invalid_retrieved")
line_case(
    "retrieved-null-text",
    with_retrieved("r-nulltext", {"chunk_id": "kb-1#c1", "rank": 1, "text": None}),
    "invalid_retrieved",
)
line_case(
    "retrieved-blank-chunk-id",
    with_retrieved("r-blank", {"chunk_id": "  ", "rank": 1, "text": "t"}),
    "invalid_retrieved",
)
line_case("retrieved-entry-not-object", with_retrieved("r-str", _r1) | {"retrieved": ["kb-1#c1"]}, "invalid_retrieved")
line_case("retrieved-rank-string", with_retrieved("r-rank", _r1 | {"rank": "1"}), "invalid_retrieved")
line_case("retrieved-rank-bool", with_retrieved("r-rankb", _r1 | {"rank": True}), "invalid_retrieved")
line_case("retrieved-doc-id-int", with_retrieved("r-doc", _r1 | {"doc_id": 42}), "invalid_retrieved")
line_case(
    "retrieved-rank-beyond-int32",
    with_retrieved("r-rank-big", _r1 | {"rank": 2**31}),
    "invalid_retrieved",
)
line_case(
    "duplicate-chunk-id",
    with_retrieved("dup-chunk", _r1, _r1 | {"rank": 2, "text": "other text"}),
    "duplicate_chunk_id",
)
line_case(
    "duplicate-chunk-id-after-trim",
    with_retrieved("dup-trim", _r1, _r1 | {"chunk_id": " kb-1#c1 ", "rank": 2}),
    "duplicate_chunk_id",
)

# --- citations (the answer is rejected, the prompt is kept) -------------------------------------------------

line_case(
    "citations-string-not-json", bad("c-notjson", citations="[{chunk_id: kb-1#c1}"), "citations_not_json", answer=True
)
line_case(
    "citations-string-deeply-nested",
    bad("c-deep", citations="[" * 100_000 + "]" * 100_000),
    "citations_not_json",
    answer=True,
)
line_case(
    "citations-not-a-list",
    bad("c-dict", citations={"chunk_id": "kb-1#c1", "span": "s", "claim": "c"}),
    "citations_not_list",
    answer=True,
)
line_case("citations-number", bad("c-num", citations=5), "citations_not_list", answer=True)
line_case(
    "citations-string-holding-an-object", bad("c-strobj", citations='{"a": 1}'), "citations_not_list", answer=True
)
line_case("citation-not-object", with_citation("c-entry", "kb-1#c1"), "citation_not_object", answer=True)
line_case(
    "citation-missing-chunk-id",
    with_citation("c-nochunk", {"span": "s", "claim": "c"}),
    "citation_missing_key",
    answer=True,
)
line_case(
    "citation-missing-claim",
    with_citation("c-noclaim", {"chunk_id": "kb-1#c1", "span": "Refunds take"}),
    "citation_missing_key",
    answer=True,
)
line_case(  # a span-less citation: valid, anchored by the gate
    "citation-null-span",
    with_citation("c-nullspan", {"chunk_id": "kb-1#c1", "span": None, "claim": "c"}),
    None,
)
line_case(
    "citation-span-int",
    with_citation("c-intspan", {"chunk_id": "kb-1#c1", "span": 3, "claim": "c"}),
    "citation_wrong_type",
    answer=True,
)
line_case(
    "citation-empty-claim",
    with_citation("c-emptyclaim", {"chunk_id": "kb-1#c1", "span": "Refunds take", "claim": ""}),
    "citation_empty_field",
    answer=True,
)
line_case(
    "citation-span-empty-after-normalization",
    with_citation("c-zwspan", {"chunk_id": "kb-1#c1", "span": "\u00ad\u200b\u2060", "claim": "Refunds are slow."}),
    "citation_empty_field",
    answer=True,
)


def _span_longer_check(con) -> None:
    check_provenance(con, DAY_START, DAY_END, now=NOW)
    got = con.sql("select reason from provenance_results where citation_id = 'bad-span-long#0'").fetchall()
    assert got == [("span_missing",)]


line_case(
    "span-longer-than-its-chunk",
    with_citation(
        "span-long", {"chunk_id": "kb-1#c1", "span": CHUNKS["kb-1#c1"] + " Refunds are free of charge.", "claim": "c"}
    ),
    None,
    check=_span_longer_check,
)

# --- surfaces, templates, prompt encodings ---------------------------------------------------------------


def _unknown_surface_check(con) -> None:
    assert con.sql("select template, profile_status from prompts where request_id = 'bad-surface'").fetchall() == [
        (CONFIG.surface("default").template, "ok")
    ]
    check_provenance(con, DAY_START, DAY_END, now=NOW)
    select_sample(con, DAY_START, DAY_END, CONFIG)
    rows = con.sql("select distinct stakes, why from support_sample where request_id = 'bad-surface'").fetchall()
    assert rows == [("high", "high_stakes")]  # [surfaces.default] of CONFIG, not the built-in 'low'


_no_template = bad("surface", surface="surface-nobody-configured")
del _no_template["template"]
line_case("unknown-surface", _no_template, None, check=_unknown_surface_check)


def _unknown_template_check(con) -> None:
    rows = con.sql(
        "select profile_status, template, prompt_raw from prompts where request_id = 'bad-template'"
    ).fetchall()
    assert rows == [("unknown_template", "my-own-template", good(0)["prompt"])]
    assert con.sql("select count(*) from citations where request_id = 'bad-template'").fetchall() == [(0,)]


line_case(
    "unknown-template",
    bad("template", template="my-own-template"),
    "unknown_template",
    answer=True,
    check=_unknown_template_check,
)
line_case(
    "json-prompt-not-json",
    bad("j-notjson", prompt_encoding="json", prompt='{"messages": [{"role": "user", "content": "x"}'),
    "prompt_undecodable",
)
line_case(
    "json-prompt-without-messages",
    bad("j-nomsg", prompt_encoding="json", prompt='{"model": "gpt", "temperature": 0}'),
    "prompt_undecodable",
)
line_case(
    "json-prompt-messages-not-list",
    bad("j-msgstr", prompt_encoding="json", prompt='{"messages": "Context: ..."}'),
    "prompt_undecodable",
)
line_case("json-prompt-array", bad("j-array", prompt_encoding="json", prompt="[1, 2]"), "prompt_undecodable")
line_case(
    "json-prompt-deeply-nested",
    bad("j-deep", prompt_encoding="json", prompt="[" * 100_000 + "]" * 100_000),
    "prompt_undecodable",
)
line_case(
    "python-repr-code-not-literal",
    bad("py-code", prompt_encoding="python_repr", prompt="__import__('os').system('touch pwned')"),
    "prompt_undecodable",
)
line_case(
    "python-repr-unterminated",
    bad("py-open", prompt_encoding="python_repr", prompt="'Answer using only the context"),
    "prompt_undecodable",
)
line_case(
    "python-repr-list-not-str",
    bad("py-list", prompt_encoding="python_repr", prompt="['Answer', 'using']"),
    "prompt_undecodable",
)
line_case(
    "python-repr-bytes-not-str",
    bad("py-bytes", prompt_encoding="python_repr", prompt="b'Answer using only'"),
    "prompt_undecodable",
)
line_case(
    "python-repr-deeply-nested",
    bad("py-deep", prompt_encoding="python_repr", prompt="(" * 100_000 + ")" * 100_000),
    "prompt_undecodable",
)
line_case(
    "python-repr-unhashable-literal",
    bad("py-unhashable", prompt_encoding="python_repr", prompt="{[]: 'Answer'}"),
    "prompt_undecodable",
)

# --- whole files -------------------------------------------------------------------------------------------


def _write_no_trailing_newline(landing: Path) -> None:
    write_lines(landing / "a.jsonl", [good(1), good(2), good(3), good(4)], final_newline=False)


file_case("no-trailing-newline", _write_no_trailing_newline, [], {"a.jsonl": GOOD_IDS})


def _write_bom(landing: Path) -> None:
    (landing / "a.jsonl").write_bytes(b"\xef\xbb\xbf" + b"".join(encode(good(i)) + b"\n" for i in (1, 2, 3, 4)))


file_case("utf8-bom", _write_bom, [], {"a.jsonl": GOOD_IDS})


def _write_truncated_gz(landing: Path) -> None:
    # two gzip members: the first is whole (3 lines), the second is cut inside its deflate stream
    first = gzip.compress(b"".join(encode(good(i)) + b"\n" for i in (1, 2, 3)))
    second = gzip.compress(b"".join(encode(good(i)) + b"\n" for i in (7, 8, 9)))
    (landing / "t.jsonl.gz").write_bytes(first + second[:20])  # header + a few deflate bytes: no whole line
    write_lines(landing / "a.jsonl", [good(4)])


def _truncated_gz_check(con) -> None:
    rows = con.sql(
        "select status, lines_read, records_ingested from ingested_files where file_name = 't.jsonl.gz'"
    ).fetchall()
    assert rows == [("failed", 3, 3)]


# line None: docs/log-format.md says whole-file rows have line_no 0, the code writes the line after the last one read
# (see test_file_unreadable_is_a_whole_file_row)
file_case(
    "truncated-gz",
    _write_truncated_gz,
    [("t.jsonl.gz", None, "file_unreadable")],
    {"t.jsonl.gz": ["good-1", "good-2", "good-3"], "a.jsonl": ["good-4"]},
    check=_truncated_gz_check,
)


def _write_not_gzip(landing: Path) -> None:
    write_lines(landing / "plain.jsonl.gz", [good(1)])  # named .gz, holds plain text
    write_lines(landing / "a.jsonl", [good(2)])


file_case(
    "gz-name-plain-content", _write_not_gzip, [("plain.jsonl.gz", None, "file_unreadable")], {"a.jsonl": ["good-2"]}
)


def _write_non_log(landing: Path) -> None:
    (landing / "notes.txt").write_text(json.dumps(good(9)) + "\n")
    (landing / "a.jsonl.bak").write_text(json.dumps(good(8)) + "\n")
    write_lines(landing / "a.jsonl", [good(1), good(2)])


file_case(
    "non-log-files",
    _write_non_log,
    [("a.jsonl.bak", 0, "not_a_log_file"), ("notes.txt", 0, "not_a_log_file")],
    {"a.jsonl": ["good-1", "good-2"]},
)


def _write_directory(landing: Path) -> None:
    (landing / "2026-11-02.jsonl").mkdir()
    write_lines(landing / "2026-11-02.jsonl" / "inner.jsonl", [good(9)])  # never read: not descended into
    write_lines(landing / "a.jsonl", [good(1), good(2)])


file_case(
    "directory-named-like-a-log",
    _write_directory,
    [("2026-11-02.jsonl", 0, "not_a_file")],
    {"a.jsonl": ["good-1", "good-2"]},
)


def _write_dangling_symlink(landing: Path) -> None:
    (landing / "gone.jsonl").symlink_to(landing.parent / "does-not-exist.jsonl")
    write_lines(landing / "a.jsonl", [good(1)])


file_case(
    "dangling-symlink-out-of-the-folder",
    _write_dangling_symlink,
    [("gone.jsonl", 0, "symlink_outside_landing")],
    {"a.jsonl": ["good-1"]},
)


def _write_dangling_symlink_inside(landing: Path) -> None:
    (landing / "gone.jsonl").symlink_to(landing / "never-written.jsonl")
    write_lines(landing / "a.jsonl", [good(1)])


file_case(
    "dangling-symlink-in-the-folder",
    _write_dangling_symlink_inside,
    [("gone.jsonl", 0, "not_a_file")],
    {"a.jsonl": ["good-1"]},
)


def _write_empty(landing: Path) -> None:
    (landing / "empty.jsonl").write_bytes(b"")
    write_lines(landing / "a.jsonl", [good(1), good(2)])


def _empty_check(con) -> None:
    rows = con.sql(
        "select status, lines_read, records_ingested, records_rejected from ingested_files "
        "where file_name = 'empty.jsonl'"
    ).fetchall()
    assert rows == [("complete", 0, 0, 0)]


file_case("empty-file", _write_empty, [], {"a.jsonl": ["good-1", "good-2"]}, check=_empty_check)


def _write_only_newlines(landing: Path) -> None:
    (landing / "blank.jsonl").write_bytes(b"\n\r\n")
    write_lines(landing / "a.jsonl", [good(1)])


file_case(
    "file-of-blank-lines",
    _write_only_newlines,
    [("blank.jsonl", 1, "empty_line"), ("blank.jsonl", 2, "empty_line")],
    {"a.jsonl": ["good-1"]},
)


def _write_bad_file_beside_good(landing: Path) -> None:
    (landing / "binary.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    write_lines(landing / "a.jsonl", [good(1), good(2)])


file_case(
    "binary-file-beside-a-good-one",
    _write_bad_file_beside_good,
    # a lone CR ends a line too: b"\x00\x00\x00\rIHDR" is lines 3 and 4
    [
        ("binary.jsonl", 1, "invalid_utf8"),
        ("binary.jsonl", 2, "invalid_json"),
        ("binary.jsonl", 3, "nul_byte"),
        ("binary.jsonl", 4, "invalid_json"),
    ],
    {"a.jsonl": ["good-1", "good-2"]},
)


# ---------------------------------------------------------------------------------------------------
# The checks


def table_counts(con) -> dict:
    return {t: con.sql(f"select count(*) from {t}").fetchall()[0][0] for t in TABLES}


def physical_lines(path: Path) -> int:
    """Lines as docs/log-format.md defines them: ended by LF, CRLF or a lone CR; a last line without its end counts
    too."""
    data = path.read_bytes()
    return len(data.splitlines())


def assert_ledger_balances(con, landing: Path) -> None:
    """For every file: lines read = records ingested + records rejected, and those are the rows in the tables."""
    ledger = con.sql(
        "select file_name, status, lines_read, records_ingested, records_rejected, answers_rejected from ingested_files"
    ).fetchall()
    for name, status, read, ingested, rejected, answers in ledger:
        assert read == ingested + rejected, name
        params = {"f": name}
        [(stored,)] = con.sql("select count(*) from prompts where source_file = $f", params=params).fetchall()
        [(line_rejects,)] = con.sql(
            "select count(*) from ingest_rejects where source_file = $f and not list_contains($file_reasons, reason)",
            params={**params, "file_reasons": list(FILE_REASONS)},
        ).fetchall()
        [(answer_rows,)] = con.sql(
            "select count(*) from answer_rejects where source_file = $f", params=params
        ).fetchall()
        assert (stored, line_rejects, answer_rows) == (ingested, rejected, answers), name
        if status == "complete" and not name.endswith(".gz"):
            assert read == physical_lines(landing / name), name  # no line of the file went unread
    # nothing in the tables comes from a file the ledger does not know
    known = {row[0] for row in ledger}
    for table, column in (
        ("prompts", "source_file"),
        ("ingest_rejects", "source_file"),
        ("answer_rejects", "source_file"),
    ):
        assert {f for (f,) in con.sql(f"select distinct {column} from {table}").fetchall()} <= known, table


def assert_case(con, landing: Path, case: Case) -> None:
    got = con.sql("select source_file, line_no, reason from ingest_rejects order by source_file, line_no").fetchall()
    expected = sorted(case.rejects, key=lambda r: (r[0], r[1] or 0))
    assert len(got) == len(expected), got
    for (file, line, reason), (want_file, want_line, reasons) in zip(got, expected):
        assert file == want_file and reason in reasons, (got, expected)
        if want_line is not None:
            assert line == want_line, (got, expected)
    answers = con.sql("select source_file, source_line, reason from answer_rejects order by all").fetchall()
    assert answers == sorted(case.answer_rejects)
    for name, ids in case.prompts.items():
        stored = con.sql(
            "select request_id from prompts where source_file = $f order by source_line", params={"f": name}
        ).fetchall()
        assert [r for (r,) in stored] == ids, name
    assert table_counts(con)["prompts"] == sum(len(ids) for ids in case.prompts.values())
    conflicts = con.sql(
        "select request_id, source_file, source_line, existing_source from prompt_conflicts order by all"
    ).fetchall()
    assert conflicts == case.conflicts
    assert_ledger_balances(con, landing)


def _params(cases: list[Case]):
    return [
        pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.bug)] if c.bug else []) for c in cases
    ]


def test_corpus_is_large_and_unique():
    assert len(CASES) >= 30
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", _params(CASES))
def test_bad_input(case: Case, con, landing):
    case.write(landing)
    ingest_landing(con, landing, CONFIG, now=NOW, final=True)  # never raises on bad input
    assert_case(con, landing, case)
    if case.check:
        assert case.check(con) is not False
    # a second run reads nothing and changes nothing
    before = table_counts(con)
    again = ingest_landing(con, landing, CONFIG, now=NOW, final=True)
    assert again.lines_read == 0 and table_counts(con) == before


def test_file_unreadable_is_a_whole_file_row(con, landing):
    """docs/log-format.md: whole-file rows (line_no = 0) include file_unreadable; schema.sql: '0 for a whole-file
    reject'."""
    _write_truncated_gz(landing)
    ingest_landing(con, landing, CONFIG, now=NOW, final=True)
    report = dict(query(con, "report/ingest_summary").fetchall())
    [(rejected,)] = con.sql("select sum(records_rejected) from ingested_files").fetchall()
    assert report["lines rejected (ingest_rejects)"] == rejected
    assert report["files rejected (ingest_rejects)"] == 1
    [(line_no,)] = con.sql("select line_no from ingest_rejects where reason = 'file_unreadable'").fetchall()
    assert line_no == 0


# ---------------------------------------------------------------------------------------------------
# Everything at once


LINE_CASES = [c for c in CASES if c.line is not None and c.bug is None]
CRASHING = (
    "lone-surrogate-in-prompt",
    "lone-surrogate-in-request-id",
    "timestamp-past-year-9999-in-utc",
    "timestamp-before-year-1-in-utc",
    "retrieved-rank-beyond-int32",
    "python-repr-unhashable-literal",
)
BUG_LINE_CASES = [c for c in CASES if c.id in CRASHING]


def _all_in_one(cases: list[Case]) -> tuple[list[bytes], dict]:
    """good-1, bad, good-2, bad, ..., good-n: every bad line between two good ones."""
    lines, expect = [encode(good(1))], {"rejects": [], "answers": [], "ids": ["good-1"], "conflicts": 0}
    for i, case in enumerate(cases, start=2):
        lines.append(case.line)
        line_no = len(lines)
        if case.rejects:
            expect["rejects"].append((line_no, case.rejects[0][2]))
        if case.answer_rejects:
            expect["answers"].append((line_no, case.answer_rejects[0][2]))
        if case.lands:
            expect["ids"].append(case.lands)
        expect["conflicts"] += len(case.conflicts)
        lines.append(encode(good(i)))
        expect["ids"].append(f"good-{i}")
    return lines, expect


def test_all_bad_lines_in_one_file(tmp_path, landing):
    lines, expect = _all_in_one(LINE_CASES)
    (landing / "all.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    results = []
    for batch_lines in (2000, 7):  # batch boundaries must not change any outcome
        with connect(tmp_path / f"w{batch_lines}.duckdb") as con:
            ensure_schema(con)
            summary = ingest_landing(con, landing, CONFIG, now=NOW, batch_lines=batch_lines, final=True)
            rejects = con.sql("select line_no, reason from ingest_rejects order by line_no").fetchall()
            assert len(rejects) == len(expect["rejects"])
            for (line_no, reason), (want_line, reasons) in zip(rejects, expect["rejects"]):
                assert line_no == want_line and reason in reasons
            assert con.sql("select source_line, reason from answer_rejects order by 1").fetchall() == expect["answers"]
            stored = [r for (r,) in con.sql("select request_id from prompts order by source_line").fetchall()]
            assert stored == expect["ids"]
            assert con.sql("select count(*) from prompt_conflicts").fetchall() == [(expect["conflicts"],)]
            # the totals add up, in the summary, the ledger and the tables
            assert summary.lines_read == len(lines) == summary.records_ingested + summary.records_rejected
            assert summary.records_ingested == len(expect["ids"])
            assert summary.records_rejected == len(expect["rejects"])
            assert summary.answers_rejected == len(expect["answers"])
            [(read, ingested, rejected, answers)] = con.sql(
                "select lines_read, records_ingested, records_rejected, answers_rejected from ingested_files"
            ).fetchall()
            assert (read, ingested, rejected, answers) == (
                len(lines),
                len(expect["ids"]),
                len(expect["rejects"]),
                len(expect["answers"]),
            )
            assert_ledger_balances(con, landing)
            results.append((table_counts(con), rejects, stored))
    assert results[0] == results[1]


def test_all_bad_lines_including_the_crashing_kinds_in_one_file(con, landing):
    lines, _ = _all_in_one(LINE_CASES + BUG_LINE_CASES)
    (landing / "all.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    summary = ingest_landing(con, landing, CONFIG, now=NOW, final=True)
    assert summary.lines_read == len(lines) == summary.records_ingested + summary.records_rejected
    assert_ledger_balances(con, landing)


def test_every_bad_line_gives_the_same_rows_in_process_and_in_parse_workers(tmp_path, landing, monkeypatch):
    """Every table, row for row with every reject's detail and raw line, is the same whether the batches are parsed
    in the ingest process or in two spawned workers (which compact their frames and run polars on one thread); and
    no reject detail depends on the run: a python_repr prompt holding a call named the parser's node with its memory
    address ('<ast.Call object at 0x7f…>'), so two ingests of one line differed."""
    lines, _ = _all_in_one(LINE_CASES + BUG_LINE_CASES)
    (landing / "all.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(ingest_workers, "SPAWN_AFTER_BYTES", 0)
    tables = [t for t in TABLES if t != "ingested_files"] + ["request_source_lines"]
    rows = []
    for workers in (1, 2):
        with connect(tmp_path / f"w{workers}.duckdb") as con:
            ensure_schema(con)
            summary = ingest_landing(con, landing, CONFIG, now=NOW, batch_lines=7, final=True, workers=workers)
            assert summary.parse_workers == (workers if workers > 1 else 0)
            rows.append({t: sorted(con.sql(f"select * from {t}").fetchall(), key=repr) for t in tables})
            details = [d for (d,) in con.sql("select detail from ingest_rejects").fetchall()]
            assert not [d for d in details if re.search(r"0x[0-9a-fA-F]{6,}", d or "")]
            [(detail,)] = con.sql("select detail from ingest_rejects where request_id = 'bad-py-code'").fetchall()
            assert detail == (
                "python_repr prompt is not a Python string literal: ValueError: malformed node or string on line 1: "
                "<ast.Call>"
            )
    assert len(rows[0]["ingest_rejects"]) == len(LINE_CASES + BUG_LINE_CASES) - sum(
        1 for c in LINE_CASES + BUG_LINE_CASES if not c.rejects
    )
    for table in tables:
        assert rows[0][table] == rows[1][table], table
