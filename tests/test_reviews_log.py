"""The reviews log: validation, round trip, supersede, real concurrent writers, torn last lines."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from datetime import datetime, timedelta, timezone

import pytest

from citegate_assets.lib.review.reviews import (
    CAUSES,
    LOG_NAME,
    LogLine,
    Review,
    ReviewError,
    append_review,
    latest_by_citation,
    make_review,
    read_reviews,
)

T0 = datetime(2026, 11, 30, 6, 30, 1, 123456, tzinfo=timezone.utc)


def review(citation_id="c-1", outcome="accept", **kw) -> Review:
    base = dict(
        queue_reason="span_missing", claim="The Pro plan costs $49 per month.", passage="kb-1#c1 text", reviewer="ana"
    )
    return make_review(citation_id=citation_id, outcome=outcome, **(base | kw))


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# ------------------------------------------------------------------------------------------------ make_review


def test_make_review_fields_and_format():
    r = review(
        outcome=" Escalate ", cause=" Ranking ", note="  wrong chunk ranked first  ", now=T0, citation_id=" c-9 "
    )
    assert r.outcome == "escalate" and r.cause == "ranking" and r.note == "wrong chunk ranked first"
    assert r.citation_id == " c-9 "  # ids are kept exactly as given: " r1#2" and "r1#2" are two citations
    assert r.reviewed_at == "2026-11-30T06:30:01.123456Z"
    assert len(r.review_id) == 32 and int(r.review_id, 16) >= 0
    assert r.claim == "The Pro plan costs $49 per month." and r.passage == "kb-1#c1 text"
    line = r.to_json()
    assert "\n" not in line and list(json.loads(line)) == sorted(json.loads(line))
    # non-UTC input is converted; microseconds kept even when zero
    r2 = review(now=datetime(2026, 11, 30, 8, 30, tzinfo=timezone(timedelta(hours=2))))
    assert r2.reviewed_at == "2026-11-30T06:30:00.000000Z"
    assert review(outcome="repair", cause="chunking").cause == "chunking"
    assert review(outcome="repair").cause is None
    assert review(note="   ").note is None
    assert review(passage=None).passage is None
    assert review().review_id != review().review_id


def test_to_json_keeps_unicode_and_stays_one_line(tmp_path):
    r = review(claim="Refunds take 3\u20135 days\u2028second\nthird", note="caf\u00e9 \u201cok\u201d")
    line = r.to_json()
    assert "\u2013" in line and "\u00e9" in line and "\n" not in line
    append_review(tmp_path, r)
    [read] = read_reviews(tmp_path)
    assert read.error is None and read.review == r


def test_reviewer_default(monkeypatch):
    def make():
        return make_review(citation_id="c", outcome="accept", queue_reason="q", claim="x", passage=None)

    monkeypatch.setenv("CITEGATE_REVIEWER", "  bea ")
    monkeypatch.setenv("USER", "carl")
    assert make().reviewer == "bea"
    monkeypatch.setenv("CITEGATE_REVIEWER", "")
    assert make().reviewer == "carl"
    monkeypatch.delenv("CITEGATE_REVIEWER")
    monkeypatch.delenv("USER")
    monkeypatch.setattr("getpass.getuser", lambda: "dora")
    assert make().reviewer == "dora"

    def no_user():
        raise OSError("no username")

    monkeypatch.setattr("getpass.getuser", no_user)
    assert make().reviewer == "unknown"


REFUSALS = [
    (dict(outcome="acept"), "unknown outcome 'acept' (expected accept, repair or escalate)"),
    (dict(outcome=""), "unknown outcome ''"),
    (dict(outcome="escalate"), "escalate needs --cause (one of: chunking, truncation, ranking, other)"),
    (dict(outcome="escalate", cause="  "), "escalate needs --cause"),
    (
        dict(outcome="escalate", cause="typo"),
        "unknown cause 'typo' (expected one of: chunking, truncation, ranking, other)",
    ),
    (dict(outcome="repair", cause="typo"), "unknown cause 'typo'"),
    (dict(outcome="accept", cause="ranking"), "accept takes no --cause (got 'ranking')"),
    (dict(citation_id="  "), "citation_id is empty"),
    (dict(queue_reason=""), "queue_reason is empty"),
    (dict(claim=""), "claim is empty"),
    (dict(reviewer=" "), "reviewer is empty"),
    (dict(note=3), "note must be a string or None"),
    (dict(claim="bad \ud800 surrogate"), "claim is not valid Unicode"),
    (dict(now=datetime(2026, 11, 30, 6, 30)), "now must be timezone-aware"),
]


@pytest.mark.parametrize("kwargs, message", REFUSALS, ids=[m for _, m in REFUSALS])
def test_make_review_refusals_write_nothing(tmp_path, kwargs, message):
    folder = tmp_path / "reviews"
    with pytest.raises(ReviewError) as info:
        append_review(folder, review(**kwargs))
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)
    assert not folder.exists()

    # and an existing log stays byte-for-byte unchanged
    append_review(folder, review())
    before = (folder / LOG_NAME).read_bytes()
    with pytest.raises(ReviewError):
        append_review(folder, review(**kwargs))
    assert (folder / LOG_NAME).read_bytes() == before


def test_append_refuses_a_hand_built_invalid_review(tmp_path):
    good = review()
    bad = Review(**(good.__dict__ | {"outcome": "escalate", "cause": None}))
    with pytest.raises(ReviewError, match="escalate needs --cause"):
        append_review(tmp_path / "reviews", bad)
    assert not (tmp_path / "reviews").exists()


# ------------------------------------------------------------------------------------------------ round trip


def test_round_trip_in_order_with_private_modes(tmp_path):
    folder = tmp_path / "state" / "reviews"
    written = [
        review("c-1", "accept", now=T0),
        review("c-2", "repair", cause="truncation", note="span cut at 512 tokens", now=T0),
        review("c-3", "escalate", cause="other", passage=None, now=T0 + timedelta(seconds=1)),
    ]
    paths = {append_review(folder, r) for r in written}
    assert paths == {folder / LOG_NAME}
    assert mode(folder) == 0o700
    assert mode(folder / LOG_NAME) == 0o600

    lines = read_reviews(folder)
    assert [line.review for line in lines] == written
    assert [(line.file, line.line_no, line.error) for line in lines] == [(LOG_NAME, i, None) for i in (1, 2, 3)]
    assert [line.raw for line in lines] == [r.to_json() for r in written]
    assert (folder / LOG_NAME).read_text(encoding="utf-8").count("\n") == 3


def test_modes_hold_under_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        append_review(tmp_path / "reviews", review())
    finally:
        os.umask(old)
    assert mode(tmp_path / "reviews") == 0o700
    assert mode(tmp_path / "reviews" / LOG_NAME) == 0o600


def test_missing_folder_reads_empty(tmp_path):
    assert read_reviews(tmp_path / "nope") == []
    assert latest_by_citation([]) == {}


def test_reads_every_jsonl_file_sorted_by_name(tmp_path):
    a, b, c = review("c-1", now=T0), review("c-2", now=T0), review("c-3", now=T0)
    (tmp_path / "b.jsonl").write_text(b.to_json() + "\n", encoding="utf-8")
    (tmp_path / "a.jsonl").write_text(a.to_json() + "\n\n" + c.to_json() + "\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a log\n")
    (tmp_path / ".hidden.jsonl").write_text("junk\n")
    lines = read_reviews(tmp_path)
    got = [(line.file, line.line_no, line.review) for line in lines]
    assert got == [("a.jsonl", 1, a), ("a.jsonl", 3, c), ("b.jsonl", 1, b)]


def test_bad_lines_are_reported_not_raised(tmp_path):
    good = review("c-1", now=T0)
    record = json.loads(good.to_json())
    bad_lines = {
        "not json {": "invalid JSON",
        "[1, 2]": "not a JSON object",
        json.dumps({k: v for k, v in record.items() if k != "claim"}): "missing field(s): claim",
        json.dumps(record | {"outcome": "maybe"}): "unknown outcome 'maybe'",
        json.dumps(record | {"outcome": "escalate", "cause": None}): "escalate needs --cause",
        json.dumps(record | {"cause": "ranking"}): "accept takes no --cause",
        json.dumps(record | {"reviewed_at": "2026-11-30 06:30"}): "reviewed_at",
        json.dumps(record | {"citation_id": 7}): "citation_id must be a string",
    }
    body = "\n".join([good.to_json(), *bad_lines]) + "\n"
    (tmp_path / LOG_NAME).write_bytes(body.encode("utf-8") + b"\xff\xfe bad bytes\n")
    lines = read_reviews(tmp_path)
    assert lines[0].review == good and lines[0].error is None
    assert len(lines) == 1 + len(bad_lines) + 1
    for line, (raw, reason) in zip(lines[1:], bad_lines.items()):
        assert line.review is None and reason in line.error and line.raw == raw
    assert lines[-1].review is None and "UTF-8" in lines[-1].error
    assert latest_by_citation(lines) == {"c-1": good}


# ------------------------------------------------------------------------------------------------ supersede


def test_later_review_supersedes_and_both_lines_stay(tmp_path):
    first = review("c-1", "escalate", cause="ranking", now=T0)
    second = review("c-1", "repair", note="fixed chunk boundary", now=T0 + timedelta(microseconds=1))
    other = review("c-2", "accept", now=T0)
    for r in (second, other, first):  # written out of time order: reviewed_at decides, not position
        append_review(tmp_path, r)
    lines = read_reviews(tmp_path)
    assert latest_by_citation(lines) == {"c-1": second, "c-2": other}
    ids = [json.loads(raw)["review_id"] for raw in (tmp_path / LOG_NAME).read_text().splitlines()]
    assert ids == [second.review_id, other.review_id, first.review_id]


def test_tie_on_reviewed_at_goes_to_the_later_line(tmp_path):
    a = review("c-1", "accept", now=T0)
    b = review("c-1", "repair", now=T0)
    (tmp_path / "1.jsonl").write_text(b.to_json() + "\n")
    (tmp_path / "2.jsonl").write_text(a.to_json() + "\n")
    assert latest_by_citation(read_reviews(tmp_path)) == {"c-1": a}
    append_review(tmp_path, b)  # reviews.jsonl sorts after 1.jsonl and 2.jsonl
    assert latest_by_citation(read_reviews(tmp_path))["c-1"] == b


# ------------------------------------------------------------------------------------------------ concurrency


def _writer(folder: str, worker: int, count: int, start) -> None:
    start.wait()
    for i in range(count):
        append_review(
            folder,
            make_review(
                citation_id=f"w{worker}-{i}",
                outcome=("accept", "repair", "escalate")[i % 3],
                cause=None if i % 3 == 0 else CAUSES[i % 4],
                note=f"worker {worker} review {i} " + "x" * (i % 50) * 40,  # lines up to ~2.5 kB
                reviewer=f"reviewer-{worker}",
                queue_reason="span_missing",
                claim="Refunds take 3\u20135 business days. " * 5,
                passage=None if i % 7 == 0 else "passage " * 30,
            ),
        )


@pytest.mark.parametrize("workers", [2, 4])
def test_concurrent_processes_lose_nothing(tmp_path, workers):
    count = 300
    folder = tmp_path / "reviews"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(folder), w, count, start)) for w in range(workers)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0] * workers

    raw_lines = (folder / LOG_NAME).read_bytes().split(b"\n")
    assert raw_lines.pop() == b""  # ends with a newline
    assert len(raw_lines) == workers * count
    records = [json.loads(line) for line in raw_lines]  # each line is one whole JSON object
    assert len({r["review_id"] for r in records}) == workers * count
    assert {r["citation_id"] for r in records} == {f"w{w}-{i}" for w in range(workers) for i in range(count)}
    for w in range(workers):  # each writer's own lines keep their order
        mine = [int(r["citation_id"].split("-")[1]) for r in records if r["reviewer"] == f"reviewer-{w}"]
        assert mine == list(range(count))

    lines = read_reviews(folder)
    assert len(lines) == workers * count and all(line.error is None for line in lines)
    assert len(latest_by_citation(lines)) == workers * count


# ------------------------------------------------------------------------------------------------ torn lines


def test_truncated_last_line_is_an_error_line(tmp_path):
    good = [review("c-1", now=T0), review("c-2", "repair", now=T0)]
    for r in good:
        append_review(tmp_path, r)
    torn = review("c-3", "escalate", cause="chunking").to_json()
    torn = torn[: len(torn) // 2]
    with open(tmp_path / LOG_NAME, "a", encoding="utf-8") as handle:
        handle.write(torn)  # a writer killed mid-write: half a line, no newline

    lines = read_reviews(tmp_path)
    assert [line.review for line in lines[:2]] == good
    assert lines[2] == LogLine(LOG_NAME, 3, None, lines[2].error, torn)
    assert "no trailing newline" in lines[2].error
    assert latest_by_citation(lines) == {"c-1": good[0], "c-2": good[1]}

    # the next append starts on a fresh line: the torn line stays an error, the new review is intact
    later = review("c-3", "escalate", cause="chunking", now=T0)
    append_review(tmp_path, later)
    lines = read_reviews(tmp_path)
    assert [line.review for line in lines] == [*good, None, later]
    assert "invalid JSON" in lines[2].error and lines[2].raw == torn
    assert lines[3].line_no == 4


def test_complete_json_without_newline_is_still_an_error_line(tmp_path):
    r = review("c-1", now=T0)
    (tmp_path / LOG_NAME).write_text(r.to_json(), encoding="utf-8")
    [line] = read_reviews(tmp_path)
    assert line.review is None and "no trailing newline" in line.error and line.raw == r.to_json()
