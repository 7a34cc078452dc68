"""A span-less citation in review: its queue entry carries the anchor (the chunk's sentence that best supports the
claim), `citegate queue show` prints it escaped, and the review page highlights it, escaped, in the retrieved text
with the part that never reached the prompt struck. One real nightly run over answers with inline markers."""

from __future__ import annotations

from datetime import date

import pytest
from markupsafe import escape

from citegate_assets.cli import main
from citegate_assets.lib.core.terminal import safe
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan

from .helpers import copy_run, marker_record, run_once, write_jsonl
from .test_review_web_http import Server, sign_in

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 3))
# the cut-off sentence of kb#3, which the truncated citation's claim is anchored to, made hostile
HOSTILE = "Audit logs <script>window.__xss = 1</script> are retained for 400 days \x1b[2J on the Team plan."


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("markers-review")
    record = marker_record("brackets", request_id="marked-1")
    for chunk in record["retrieved"]:
        if chunk["chunk_id"] == "kb#3":
            chunk["text"] = chunk["text"].replace("Audit logs are retained for 400 days on the Team plan.", HOSTILE)
    (root / "landing").mkdir()
    write_jsonl(root / "landing" / "marked.jsonl", [record])
    run_once(root, PLAN)
    return root


@pytest.fixture
def warehouse(built, tmp_path, monkeypatch):
    copy_run(built, tmp_path)
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(tmp_path / "w.duckdb"))
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    return tmp_path / "w.duckdb"


def _entry(warehouse, reason: str) -> dict:
    with connect(warehouse, read_only=True) as con:
        cursor = con.execute(
            "select * from citation_queue where request_id = 'marked-1' and reason = $r order by citation_id limit 1",
            {"r": reason},
        )
        names = [d[0] for d in cursor.description]
        return dict(zip(names, cursor.fetchone()))


def test_the_queue_entry_of_a_truncated_anchor_carries_the_anchor_and_the_marker(warehouse):
    entry = _entry(warehouse, "span_truncated")
    assert (entry["chunk_id"], entry["origin"], entry["cited_as"], entry["span_given"]) == (
        "kb#3",
        "marker",
        "[3]",
        False,
    )
    assert entry["claim"] == "Audit logs are retained for 400 days on the Team plan."
    assert entry["anchor"] == HOSTILE and entry["span"] is None
    with connect(warehouse, read_only=True) as con:
        [(retrieved,)] = con.execute(
            "select coalesce(text_normalized, text) from retrievals where request_id = 'marked-1' and chunk_id = 'kb#3'"
        ).fetchall()
    assert retrieved[entry["anchor_start"] : entry["anchor_end"]] == HOSTILE
    dropped = _entry(warehouse, "dropped_before_prompt")
    assert dropped["chunk_id"] == "kb#5" and dropped["anchor"].startswith("The REST API allows 600 requests")


def test_queue_show_prints_the_anchor_escaped(warehouse, capsys):
    entry = _entry(warehouse, "span_truncated")
    assert main(["queue", "show", entry["citation_id"]]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "anchor" in out and safe(HOSTILE)[:60] in out.replace("\n" + " " * 16, " ")
    assert "(cut off: it never reached the prompt)" in out.replace("\n" + " " * 16, " ")
    assert "kb#3  (marker '[3]'; passage as it reached the prompt)" in out


def test_the_review_page_highlights_the_anchor_escaped_in_the_cut_chunk(built, tmp_path):
    copy_run(built, tmp_path)
    server = Server(tmp_path)
    try:
        session = sign_in(server)
        entry = _entry(tmp_path / "w.published.duckdb", "span_truncated")
        page = session.get(f"{server.base}/entry", params={"id": entry["citation_id"]})
        assert page.status_code == 200
        html = page.text
        assert f'<dd id="anchor"><mark>{escape(HOSTILE)}</mark>' in html
        assert (
            f'<span class="cut" title="the anchor, cut off: never reached the prompt"><mark>{escape(HOSTILE)}' in html
        )
        assert '<code id="cited-as">[3]</code> (marker)' in html
        assert "<script>window" not in html
    finally:
        server.stop()


def test_every_provenance_passing_marker_citation_reaches_the_support_gate_with_its_passage(warehouse):
    """A span-less ok citation with no anchor, or one placed at its anchor, still gets a passage: none is left out
    of the numeric check or the sample (nothing fails open, nothing is silently dropped)."""
    with connect(warehouse, read_only=True) as con:
        ok = {c for (c,) in con.sql("select citation_id from provenance_results where reason = 'ok'").fetchall()}
        numeric = {c for (c,) in con.sql("select citation_id from numeric_checks").fetchall()}
        sampled = {c for (c,) in con.sql("select citation_id from support_sample").fetchall()}
        [(unanchored,)] = con.sql(
            "select count(*) from citations c join provenance_results r using (citation_id) "
            "where r.reason = 'ok' and c.anchor_start is null"
        ).fetchall()
    assert len(ok) == 7 and ok == numeric == sampled and unanchored == 2
