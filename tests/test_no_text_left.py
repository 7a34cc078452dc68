"""Forget and retention leave no byte of the text they remove (docs/retention.md): a real nightly run with a real
Dagster instance on planted text, then `citegate forget` (or a night whose retention drops the day), then every file
under the Dagster home and under the warehouse's folder (the working DuckDB file and its WAL, the text files, the
lake, the published copy) is read byte by byte."""

from __future__ import annotations

import json
import random
import string
from datetime import date, timedelta
from pathlib import Path

from citegate_assets.cli import main
from citegate_assets.lib.core.timestamps import utc_now
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import scenario_record, write_jsonl

SECRET, KEPT = "req-secret", "req-kept"
CONFIG = '[surfaces.default]\nstakes = "high"\n'  # every provenance-passing citation is judged (judge_cache)


def needles(seed: int) -> dict[str, str]:
    """Distinctive ASCII text (nothing a JSON writer escapes), one per place a request's text is stored."""
    rnd = random.Random(seed)
    return {
        what: what.upper() + "".join(rnd.choice(string.ascii_letters) for _ in range(40))
        for what in ("prompt", "chunk", "span", "claim", "answer", "mismatch", "rejected", "kept")
    }


def planted(request_id: str, logged_at: str, text: dict[str, str]) -> dict:
    """A record holding each needle: in the prompt, a retrieved chunk that never reached it (its text stored apart),
    the span of a fabricated citation (a provenance failure: the Dagster previews' candidate), the claim of a
    citation that passes provenance (judged: the judge cache), the answer, and a native location_mismatch."""
    record = scenario_record("plain-list", "text", request_id=request_id, logged_at=logged_at)
    record["prompt"] = record["prompt"].replace("Answer using only", f"{text['prompt']} Answer using only")
    record["retrieved"][3]["text"] += " " + text["chunk"]  # kb-4#c1: dropped before the prompt
    record["citations"][0]["claim"] = f"Refunds take {text['claim']} business days."
    record["citations"][1]["span"] = f"{text['span']} costs $49"  # fabricated_id
    record["citations"][7]["location_mismatch"] = f"expected {text['mismatch']}"
    record["answer"] = f"An answer: {text['answer']}"
    return record


def rejected_copy(request_id: str, day: date, text: str) -> dict:
    """A copy of the request that parses but fails validation (a timestamp without its offset)."""
    return {
        "request_id": request_id,
        "logged_at": f"{day}T10:00:00",
        "surface": "test-surface",
        "answer_model": "gpt-test",
        "prompt": f"a retried prompt {text}",
        "retrieved": [],
        "citations": [],
    }


def files_holding(roots: list[Path], text: dict[str, str]) -> dict[str, list[str]]:
    """{file: the needles its bytes hold} for every file under the roots."""
    found = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            held = [what for what, needle in text.items() if needle.encode() in data]
            if held:
                found[str(path.relative_to(root.parent))] = held
    return found


def run(tmp_path: Path, start: date, end: date, config: str) -> bool:
    (tmp_path / "citegate.toml").write_text(config)
    plan = RunPlan(start, end)
    warehouse = tmp_path / "wh" / "w.duckdb"
    return run_range(plan, landing=tmp_path / "landing", warehouse=warehouse, config_file=tmp_path / "citegate.toml")


def test_forget_leaves_no_byte_of_the_request_in_dagster_or_the_warehouse_folder(
    tmp_path, dagster_home, monkeypatch, capsys
):
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    day = date(2026, 11, 2)
    text = needles(1)
    gone = {k: v for k, v in text.items() if k != "kept"}
    landing = tmp_path / "landing"
    landing.mkdir()
    kept = scenario_record("plain-list", "text", request_id=KEPT, logged_at=f"{day}T11:00:00Z")
    kept["prompt"] = kept["prompt"].replace("Answer using only", f"{text['kept']} Answer using only")
    bad = rejected_copy(SECRET, day, text["rejected"])
    write_jsonl(landing / "2026-11-02.jsonl", [planted(SECRET, f"{day}T10:00:00Z", text), kept, bad])
    assert run(tmp_path, day, day, CONFIG).success
    warehouse_folder, published = tmp_path / "wh", tmp_path / "wh" / "w.published.duckdb"
    before = files_holding([warehouse_folder], text)
    assert {what for held in before.values() for what in held} == set(text)  # every needle was stored somewhere
    with connect(warehouse_folder / "w.duckdb", read_only=True) as con:
        # the rejected copy carries the request id its line names
        assert con.sql("select line_no, reason, request_id from ingest_rejects").fetchall() == [
            (3, "timestamp_without_timezone", SECRET)
        ]

    args = ["--warehouse", str(warehouse_folder / "w.duckdb"), "--config", str(tmp_path / "citegate.toml")]
    code = main(["forget", "--request-id", SECRET, *args])
    out = capsys.readouterr().out
    assert code == 0
    assert f"2026-11-02.jsonl line 3 (rejected line of {SECRET})" in out  # the landing line, named
    assert f"2026-11-02.jsonl line 1 (prompt of {SECRET})" in out
    assert f"rewrote {warehouse_folder / 'w.duckdb'} without the freed blocks that held it" in out

    assert files_holding([dagster_home, warehouse_folder], gone) == {}
    assert any("kept" in held for held in files_holding([warehouse_folder], text).values())  # the scan reads
    for path in (warehouse_folder / "w.duckdb", published):
        with connect(path, read_only=True) as con:
            assert con.sql(
                "select reason, raw_line from ingest_rejects where request_id = $r", params={"r": SECRET}
            ).fetchall() == [("timestamp_without_timezone", None)]
            assert con.sql(
                "select count(*), count(location_mismatch) from citations where request_id = $r", params={"r": SECRET}
            ).fetchall() == [(8, 0)]
    with connect(warehouse_folder / "w.duckdb", read_only=True) as con:
        assert con.sql("select count(*) from pending_file_rewrite").fetchall() == [(0,)]  # rewritten
        [(touched,)] = con.sql("select rows_touched from forgotten_requests").fetchall()
        assert json.loads(touched)["ingest_rejects"] == 1

    # the rejected line read again (another file): refused as before, its row keeps no text, nothing to rewrite
    write_jsonl(landing / "again.jsonl", [bad])
    assert run(tmp_path, day + timedelta(days=1), day + timedelta(days=1), CONFIG).success
    with connect(warehouse_folder / "w.duckdb", read_only=True) as con:
        assert con.sql(
            "select reason, request_id, raw_line from ingest_rejects where source_file = 'again.jsonl'"
        ).fetchall() == [("timestamp_without_timezone", SECRET, None)]
        assert con.sql("select count(*) from pending_file_rewrite").fetchall() == [(0,)]
    assert files_holding([dagster_home, warehouse_folder], gone) == {}


def test_retention_leaves_no_byte_of_a_dropped_day_in_dagster_or_the_warehouse_folder(
    tmp_path, dagster_home, monkeypatch
):
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    today = utc_now().date()
    old, recent = today - timedelta(days=3), today - timedelta(days=1)
    text = needles(2)
    gone = {k: v for k, v in text.items() if k not in ("kept", "rejected")}
    landing = tmp_path / "landing"
    landing.mkdir()
    write_jsonl(landing / "old.jsonl", [planted(SECRET, f"{old}T10:00:00Z", text)])
    assert run(tmp_path, old, old, CONFIG).success
    warehouse_folder = tmp_path / "wh"
    assert {what for held in files_holding([warehouse_folder], gone).values() for what in held} == set(gone)
    lake_before = files_holding([warehouse_folder / "w.lake"], gone)
    assert lake_before  # the day's lake files hold its text
    with connect(warehouse_folder / "w.duckdb", read_only=True) as con:
        claims = [  # the planted claim's (the kept request shares the others, and judges them again)
            c
            for (c,) in con.sql(
                "select sha256(claim_normalized) from citations where contains(claim, $n)", params={"n": text["claim"]}
            ).fetchall()
        ]
        [(cached,)] = con.sql(
            "select count(*) from judge_cache where list_contains($c, claim_sha256)", params={"c": claims}
        ).fetchall()
    assert cached > 0

    kept = scenario_record("plain-list", "text", request_id=KEPT, logged_at=f"{recent}T10:00:00Z")
    kept["prompt"] = kept["prompt"].replace("Answer using only", f"{text['kept']} Answer using only")
    write_jsonl(landing / "recent.jsonl", [kept])
    assert run(tmp_path, recent, recent, CONFIG + "[retention]\ntext_days = 1\n").success  # drops the old day

    assert files_holding([dagster_home, warehouse_folder], gone) == {}
    assert any("kept" in held for held in files_holding([warehouse_folder], text).values())
    assert not any((warehouse_folder / "w.lake" / f).exists() for f in lake_before)  # superseded at once
    with connect(warehouse_folder / "w.duckdb", read_only=True) as con:
        assert con.sql(
            "select count(*) from judge_cache where list_contains($c, claim_sha256)", params={"c": claims}
        ).fetchall() == [(0,)]
        dropped = dict(
            con.sql("select table_name, rows_dropped from text_retention where day = $d", params={"d": old}).fetchall()
        )
        assert dropped["judge_cache"] >= cached and dropped["citations"] == 8
        assert con.sql("select count(*) from pending_file_rewrite").fetchall() == [(0,)]
