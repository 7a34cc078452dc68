"""A landing line decoded by msgspec (the fast path) gives exactly what json's path gives: the same record or reject,
the same text for a reject row. Lines msgspec refuses, or whose nesting json may refuse, take json's path."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from citegate_assets.lib.core.lines import Line
from citegate_assets.lib.ingest import records
from citegate_assets.lib.ingest.records import BOM, parse_raw_line, read_raw_line, valid_line_text

from .helpers import scenario_record

NOW = datetime(2026, 11, 3, tzinfo=UTC)
MAX = 1 << 20


def record_line(**changes) -> str:
    record = scenario_record("plain-list", "text", request_id="dec-1", logged_at="2026-11-02T10:00:00Z")
    record.update(changes)
    return json.dumps(record, ensure_ascii=False)


def with_raw(line: str, field: str, raw_json: str) -> str:
    """line with field set to raw_json as written (values json.dumps cannot write: NaN, 1e400, deep nesting)."""
    return record_line(**{field: "@@"}).replace('"@@"', raw_json)


LINES = {
    "plain": record_line(),
    "ascii-escaped": json.dumps(json.loads(record_line(answer="café ☕ 😀"))),
    "surrogate-pair-escape": record_line().replace("Answer using only", "Answer \\ud83d\\ude00 using only"),
    "lone-surrogate-escape": record_line().replace("Answer using only", "Answer \\ud800 using only"),
    "lone-low-surrogate-in-id": record_line(request_id="r-\\udc00").replace("\\\\udc00", "\\udc00"),
    "duplicate-key": record_line()[:-1] + ', "surface": "second"}',
    "big-integer-rank": with_raw(record_line(), "extra", "9" * 4000),
    "too-big-integer": with_raw(record_line(), "extra", "9" * 5000),
    "float-overflow": with_raw(record_line(), "extra", "1e400"),
    "nan": with_raw(record_line(), "extra", "NaN"),
    "negative-zero": with_raw(record_line(), "extra", "-0.0"),
    "leading-zero": with_raw(record_line(), "extra", "01"),
    "control-character": record_line().replace("Answer using only", "Answer\tusing only"),
    "not-an-object": "[1, 2]",
    "null": "null",
    "blank": "  ",
    "truncated": record_line()[:-10],
    "trailing-garbage": record_line() + " x",
    "nul-escape": record_line(answer="a\x00b"),
}


def line_of(text: str | bytes, no: int = 2) -> Line:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return Line(no, raw, 0, len(raw))


def json_path(line: Line):
    return records._parse_checked(line, NOW, MAX)


@pytest.mark.parametrize("name", sorted(LINES))
def test_fast_path_gives_what_json_gives(name):
    line = line_of(LINES[name])
    assert parse_raw_line(line, NOW, MAX) == json_path(line)


def test_bytes_that_are_not_utf8_or_hold_nul_are_named_as_before():
    good = record_line().encode()
    for raw in (
        good.replace(b"Answer using only", b"Answer \xff using only"),
        good.replace(b"Answer using only", b"Answer \xed\xa0\x80 using only"),
        good.replace(b"Answer using only", b"Answer\x00using only"),
    ):
        line = line_of(raw)
        result, text = parse_raw_line(line, NOW, MAX)
        assert (result, text) == json_path(line)
        assert result.reason in ("invalid_utf8", "nul_byte")


def test_a_byte_order_mark_on_the_first_line_is_dropped_on_both_paths():
    line = line_of(BOM + LINES["plain"].encode(), no=1)
    result, text = parse_raw_line(line, NOW, MAX)
    assert (result, text) == json_path(line)
    assert result.request_id == "dec-1" and not text.startswith("\ufeff")


@pytest.mark.parametrize("depth", [400, 600, 900, 985, 995, 1200])
def test_nesting_is_refused_exactly_where_json_refuses_it(depth):
    """json.loads refuses nesting at a depth that depends on its caller's stack; msgspec at its own. A line with
    nesting FAST_PATH_MAX_DEPTH deep or more takes json's path, so the answer never depends on the decoder."""
    for field in ("citations", "extra", "retrieved"):
        line = line_of(with_raw(record_line(), field, "[" * depth + "]" * depth))
        assert parse_raw_line(line, NOW, MAX) == json_path(line)


def test_a_line_with_many_brackets_but_shallow_nesting_reads_as_json_reads_it():
    """Thousands of arrays side by side nest two deep: the decoded value is walked for its depth, not the brackets
    counted, and the record is what json gives."""
    wide = "[" + ",".join(["[]", "{}"] * 2000) + "]"
    line = line_of(with_raw(record_line(), "extra", wide))
    result, text = read_raw_line(line, NOW, MAX)
    assert text is None  # msgspec's path: json's would have kept the line's text
    assert (result, valid_line_text(line)) == json_path(line)
    assert result.request_id is not None


def test_a_valid_line_is_not_decoded_to_text_until_a_reject_row_needs_it():
    result, text = read_raw_line(line_of(LINES["plain"]), NOW, MAX)
    assert result.request_id == "dec-1" and text is None
    result, text = read_raw_line(line_of(LINES["truncated"]), NOW, MAX)
    assert result.reason == "invalid_json" and text == LINES["truncated"]
