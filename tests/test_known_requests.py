"""The in-memory lookup of history's request hashes (lib/ingest/known_requests.py): a binary search, exact at the
ends."""

from datetime import date

import polars as pl

from citegate_assets.lib.ingest.known_requests import HASH, KnownRequests, _on_days
from citegate_assets.lib.storage.warehouse import connect, ensure_schema


def test_on_days_is_exact_below_between_and_above_and_gives_every_day_of_a_hash():
    d1, d2, d3 = date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)
    history = pl.DataFrame({HASH: [3, 10, 10, 42], "day": [d1, d1, d3, d2]}, schema={HASH: pl.UInt64, "day": pl.Date})
    hashed = pl.DataFrame(
        {"request_id": ["a", "b", "c", "d", "e", "f", "g"], HASH: [0, 3, 4, 10, 41, 42, 2**64 - 1]},
        schema={"request_id": pl.String, HASH: pl.UInt64},
    )
    assert _on_days(hashed, history).rows() == [("b", d1), ("d", d1), ("d", d3), ("f", d2)]
    assert _on_days(hashed, history.clear()).is_empty()


def test_lookup_reads_history_once_and_answers_only_for_ids_it_holds(tmp_path):
    with connect(tmp_path / "w.duckdb") as con:
        ensure_schema(con)
        con.execute(
            "insert into prompt_rows (request_id, day, logged_at, surface, answer_model, template, prompt_encoding, "
            "prompt_sha256, profile_status, source_file, source_line, n_sections, normalization_version, ingested_at) "
            "select 'r' || i, date '2026-11-02', now(), 's', 'm', 't', 'text', 'sha' || i, 'ok', 'a.jsonl', i, 0, "
            "'v', now() from range(1, 2001) t(i)"
        )
        known = KnownRequests(con)
        assert known.lookup([]) == []
        assert known.lookup(["new-1", "new-2"]) == []
        assert sorted(known.lookup(["r7", "new-3", "r2000"])) == [
            ("r2000", "sha2000", "a.jsonl:2000", False),
            ("r7", "sha7", "a.jsonl:7", False),
        ]
        con.execute("delete from prompt_rows where request_id = 'r7'")  # the run's view of history is its start
        assert [row[0] for row in known.lookup(["r7"])] == []  # a hash hit is still looked up exactly
