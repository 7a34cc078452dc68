"""Logged text reaches the terminal escaped: no claim, surface, chunk id, request id, passage, note, file name
or reject detail can clear the screen, hide a link, rewrite or reverse a line, or fake one of the tool's lines."""

from __future__ import annotations

import unicodedata
from datetime import date

import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from citegate_assets.cli import main
from citegate_assets.lib.core.terminal import ESCAPED_CATEGORIES, ident, quote, safe
from citegate_assets.lib.report_view import calibration_report, summarize
from citegate_assets.lib.reporting import markdown_table, text_table
from citegate_assets.lib.review.reviews import read_reviews
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import scenario_record, write_jsonl

FAST = settings(max_examples=300, deadline=None, database=None)
CLEAR, FAKE_LINE, RLO, OSC8 = (
    "\x1b[2J",
    "\r[accepted by cfo]",
    "\u202e",
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",
)
EVIL = CLEAR + FAKE_LINE + RLO + "\b\b\x9b\n[accepted by cfo]\t\u2028"


def forbidden(text: str, allow_newline: bool = False) -> list[str]:
    """The characters a terminal would obey (categories Cc, Cf, Cs, Zl, Zp), minus the newline if allowed."""
    return [ch for ch in text if unicodedata.category(ch) in ESCAPED_CATEGORIES and not (allow_newline and ch == "\n")]


# ------------------------------------------------------------------------------------------------ the helper


@pytest.mark.parametrize(
    "raw,shown",
    [
        (CLEAR, "\\x1b[2J"),
        (FAKE_LINE, "\\r[accepted by cfo]"),
        (RLO + "abc", "\\u202eabc"),
        ("a\nb\tc\bd", "a\\nb\\tc\\x08d"),
        ("\x00\x7f\x9b", "\\x00\\x7f\\x9b"),  # NUL, DEL, the C1 CSI
        ("\u2028\u2029\u200b\ufeff\u2066", "\\u2028\\u2029\\u200b\\ufeff\\u2066"),  # separators, zero-width, isolate
        ("\U000e0041", "\\U000e0041"),  # a tag character (Cf) beyond the BMP
        ("\ud800", "\\ud800"),  # a lone surrogate: could not even be encoded
        (OSC8, "\\x1b]8;;https://evil.example\\x1b\\link\\x1b]8;;\\x1b\\"),
    ],
)
def test_safe_shows_controls_visibly(raw, shown):
    assert safe(raw) == shown
    assert not forbidden(safe(raw))


def test_plain_text_is_unchanged():
    text = "Refunds take 3–5 business days. «Enterprise» 日本語 😀 r1#2  $49 C:\\data"
    assert safe(text) == text and safe(None) == "None" and safe(12) == "12"


def test_newlines_kept_only_when_asked():
    assert safe("a\nb\r\nc", newlines=True) == "a\nb\\r\nc"
    assert safe("a\nb") == "a\\nb"


def test_quote_and_ident_show_blanks_at_the_ends():
    assert (
        ident("r1#2") == "r1#2" and ident(" r1#2") == "' r1#2'" and ident("r1#2\t") == "'r1#2\\t'" and ident("") == "''"
    )
    assert quote(CLEAR) == "'\\x1b[2J'" and not forbidden(quote(EVIL)) and not forbidden(ident(EVIL))


@FAST
@given(st.text())
@example(EVIL)
@example("\n\r\x1b\u202e\x85\u061c\u180e")
def test_safe_never_lets_a_control_through(text):
    out = safe(text)
    assert not forbidden(out)
    assert safe(out) == out  # escaping is idempotent: nothing left to escape
    kept = safe(text, newlines=True)
    assert not forbidden(kept, allow_newline=True) and kept.count("\n") == text.count("\n")
    assert not forbidden(quote(text)) and not forbidden(ident(text))


@FAST
@given(st.lists(st.text(max_size=30), min_size=1, max_size=5))
def test_tables_never_let_a_control_through(cells):
    df = pl.DataFrame({"value": cells, "listed": [[c] for c in cells], "n": list(range(len(cells)))})
    for table in (text_table(df), markdown_table(df)):
        assert not forbidden(table, allow_newline=True)
        assert table.count("\n") == len(cells) + 1  # header, rule, one line per row: no cell starts a line


def test_a_cell_of_wide_characters_never_wraps_onto_a_line_of_its_own():
    """Polars cut long cells itself and measured wide characters (which count twice) against its cut, so a cell of
    them wrapped: its end started a line of its own."""
    cell = "0" * 16 + "\x1f" * 6 + "\x08" * 3 + "\u2e80" * 5
    df = pl.DataFrame({"value": [cell], "listed": [[cell]], "n": [0]})
    for table in (text_table(df), markdown_table(df)):
        assert table.count("\n") == 2, table


# ------------------------------------------------------------------------------------------------ the CLI

FILE_NAME = "logs\x1b[2J\u202e.jsonl"
SURFACE = "billing" + CLEAR + RLO
REQUEST = "req" + FAKE_LINE + RLO
CHUNK = "kb-7" + CLEAR + "#c1"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A warehouse built by the pipeline from a record whose every text field carries escape sequences."""
    tmp = tmp_path_factory.mktemp("hostile")
    mp = pytest.MonkeyPatch()
    home = tmp / "dagster_home"
    home.mkdir()
    from .conftest import PROJECT

    (home / "dagster.yaml").write_text((PROJECT / "dagster_home" / "dagster.yaml").read_text())
    warehouse = tmp / "w.duckdb"
    for name, value in {
        "DAGSTER_HOME": home,
        "CITEGATE_WAREHOUSE": warehouse,
        "CITEGATE_REVIEWS": tmp / "reviews",
        "CITEGATE_REVIEWER": "tester",
    }.items():
        mp.setenv(name, str(value))
    for name in ("CITEGATE_CONFIG", "CITEGATE_PUBLISHED", "CITEGATE_LANDING", "CITEGATE_LABELS"):
        mp.delenv(name, raising=False)
    mp.chdir(tmp)
    record = scenario_record("plain-list", "text", request_id=REQUEST)
    record["surface"] = SURFACE
    for c in record["citations"]:
        c["claim"] = c["claim"] + EVIL
    # a chunk that was retrieved but never reached the prompt: its id and text are shown as the passage
    record["retrieved"].append(
        {
            "chunk_id": CHUNK,
            "rank": 9,
            "text": "Passage " + EVIL + " about refunds.",
            "doc_id": "kb-7",
            "chunking": "sentence" + CLEAR,
        }
    )
    record["citations"].append({"chunk_id": CHUNK, "span": "about refunds" + FAKE_LINE, "claim": "Refunds" + EVIL})
    record["citations"].append({"chunk_id": "kb-9" + OSC8, "span": "x" + RLO, "claim": "Fabricated" + EVIL})
    other = scenario_record("plain-list", "text", request_id="req-2")
    other["surface"] = SURFACE
    # no context block where the profile looks for one: the entry has no location in the prompt
    lost = scenario_record("plain-list", "text", request_id="req-lost")
    lost["prompt"] = "Answer from what you know." + EVIL + "\nQuestion: is the Pro plan $49?\nAnswer:"
    landing = tmp / "landing"
    landing.mkdir()
    write_jsonl(landing / FILE_NAME, [record, other, lost])
    assert run_range(
        RunPlan(date(2026, 11, 2), date(2026, 11, 2)), landing=landing, warehouse=warehouse, config_file=None
    ).success
    yield warehouse, tmp
    mp.undo()


def clean(captured) -> str:
    """stdout + stderr, asserted free of anything a terminal would obey."""
    text = captured.out + captured.err
    assert "\x1b" not in text and "\r" not in text and RLO not in text
    assert not forbidden(text, allow_newline=True), forbidden(text, allow_newline=True)
    assert "\n[accepted by cfo]" not in text  # no fake line
    return text


def queued(warehouse) -> list[tuple[str, str]]:
    with connect(warehouse, read_only=True) as con:
        return con.sql("select citation_id, reason from citation_queue order by citation_id").fetchall()


def test_hostile_record_reached_the_queue(hostile):
    warehouse, _ = hostile
    entries = queued(warehouse)
    assert any(cid.startswith(REQUEST) for cid, _ in entries)
    assert {"dropped_before_prompt", "fabricated_id"} <= {reason for _, reason in entries}


def test_queue_list_is_escaped(hostile, capsys):
    assert main(["queue", "--limit", "10"]) == 0
    out = clean(capsys.readouterr())
    assert "req\\r[accepted by cfo]\\u202e#" in out and "billing\\x1b[2J\\u202e" in out and "kb-7\\x1b[2J#c1" in out
    assert "\\x1b[2J\\r[accepted by cfo]" in out  # the claim, shown for what it is


def test_queue_show_every_entry_is_escaped(hostile, capsys):
    warehouse, _ = hostile
    for cid, _ in queued(warehouse):
        assert main(["queue", "show", cid]) == 0, cid
        out = clean(capsys.readouterr())
        assert safe(cid) in out and "logs\\x1b[2J\\u202e.jsonl" in out
    assert main(["queue", "show", REQUEST + "#99"]) == 2
    assert "no queue entry 'req\\r[accepted by cfo]\\u202e#99'" in clean(capsys.readouterr())


def test_review_confirmation_and_refusal_are_escaped(hostile, capsys):
    warehouse, tmp = hostile
    cid = next(c for c, reason in queued(warehouse) if reason == "dropped_before_prompt" and c.startswith(REQUEST))
    assert main(["review", cid, "repair", "--note", EVIL, "--reviewer", "ana" + FAKE_LINE]) == 0
    out = clean(capsys.readouterr())
    assert f"on {safe(cid)} by ana\\r[accepted by cfo]" in out
    [line] = [ln for ln in read_reviews(tmp / "reviews") if ln.review.citation_id == cid]
    assert (
        line.review.note == EVIL.strip() and line.review.reviewer == "ana" + FAKE_LINE
    )  # stored as given, shown escaped
    assert main(["review", cid + CLEAR, "accept"]) == 2
    assert "no queue entry" in clean(capsys.readouterr())


def test_metrics_and_trace_are_escaped(hostile, capsys):
    assert main(["metrics"]) == 0
    assert "billing\\x1b[2J\\u202e" in clean(capsys.readouterr())
    assert main(["trace", "--metric", "provenance_pass_rate", "--surface", SURFACE, "--week", "2026-11-02"]) == 0
    out = clean(capsys.readouterr())
    assert "req\\r[accepted by cfo]\\u202e#" in out and "logs\\x1b[2J\\u202e.jsonl" in out
    assert main(["trace", "--metric", "support_rate_by_chunking", "--surface", SURFACE, "--week", "2026-11-02"]) == 2
    err = clean(capsys.readouterr())
    assert "give --breakdown, one of" in err and "sentence" in err
    assert (
        main(["trace", "--metric", "provenance_pass_rate" + CLEAR, "--surface", SURFACE, "--week", "2026-11-02"]) == 2
    )
    assert "no metric 'provenance_pass_rate\\x1b[2J'" in clean(capsys.readouterr())


def test_summaries_are_escaped(hostile):
    warehouse, _ = hostile
    text = summarize(warehouse) + calibration_report(warehouse)
    assert "billing\\x1b[2J\\u202e" in text
    assert not forbidden(text, allow_newline=True)


def test_queue_show_without_a_location_shows_the_profile_and_the_prompt(hostile, capsys):
    warehouse, _ = hostile
    lost = [c for c, reason in queued(warehouse) if c.startswith("req-lost#")]
    assert lost and all(reason == "context_not_found" for c, reason in queued(warehouse) if c in lost)
    cid = lost[0]
    assert main(["queue", "show", cid]) == 0
    out = clean(capsys.readouterr())
    assert (
        "no location in the prompt: profile 'plain-list' (prompts.template) read it, profile_status no_context_block"
        in out
    )
    assert "context_start" in out and "start of the prompt" in out and "Answer from what you know.\\x1b[2J" in out
