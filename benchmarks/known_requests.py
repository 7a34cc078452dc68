"""Ingest's check for request ids seen before, against a large history (the night's cost must not grow
with history). Per 1,000-id batch: the scan of every request id of prompt_rows that ingest once made
(sql/ingest/existing_requests.sql over the whole batch) against the lookup in the hashes read once per run
(lib/ingest/known_requests.py), on a warehouse of `rows` generated prompt rows. Five of the ids are duplicates.

    python -m benchmarks.known_requests [--work DIR] [--rows 10000000]"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCHES = 10
# the check as it was before the hashes: every batch's ids joined with every request id of history
SCAN = """select p.request_id, p.prompt_sha256 from prompt_rows p join batch_keys k on k.request_id = p.request_id"""
TARGET_MS = 50  # per batch at 10 million rows: a night of 100 batches then costs seconds, not minutes


def measure(work: Path, rows: int) -> dict:
    import polars as pl

    from citegate_assets.lib.ingest.known_requests import KnownRequests
    from citegate_assets.lib.ingest.writer import INGEST_MEMORY_LIMIT_BYTES, ingest_settings
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    work.mkdir(parents=True, exist_ok=True)
    path = work / f"history-{rows}.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        [(have,)] = con.sql("select count(*) from prompt_rows").fetchall()
        if have < rows:
            print(f"  generating {rows:,} prompt rows into {path} …", flush=True)
            con.execute(
                "insert into prompt_rows (request_id, day, logged_at, surface, answer_model, template, "
                "prompt_encoding, prompt_sha256, profile_status, source_file, source_line, n_sections, "
                "normalization_version, ingested_at) "
                "select uuid()::varchar, date '2026-01-01' + (i // 100000)::int, now(), 's', 'm', 't', 'text', "
                "md5(i::varchar), 'ok', 'a.jsonl', i, 0, 'v', now() from range($have, $rows) t(i)",
                {"have": have, "rows": rows},
            )
        batches = [[str(uuid.uuid4()) for _ in range(1000)] for _ in range(BATCHES)]
        dup = BATCHES // 2  # five ids of the latest day again, as a log shipper's re-sent lines would be
        batches[dup][:5] = [
            rid for (rid,) in con.sql("select request_id from prompt_rows order by day desc limit 5").fetchall()
        ]
        started = time.perf_counter()
        scanned = 0
        for batch in batches:
            con.register("batch_keys", pl.DataFrame({"request_id": batch}).to_arrow())
            scanned += len(con.sql(SCAN).fetchall())
            con.unregister("batch_keys")
        scan_s = (time.perf_counter() - started) / BATCHES
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        known = KnownRequests(con)
        seconds = []
        found = 0
        with ingest_settings(con, INGEST_MEMORY_LIMIT_BYTES):  # as ingest runs it
            for batch in batches:
                started = time.perf_counter()
                found += len(known.lookup(batch))
                seconds.append(time.perf_counter() - started)
        clean = [s for i, s in enumerate(seconds) if i not in (0, dup)]
    return {
        "rows": rows,
        "scan_s_per_batch": scan_s,
        "first_batch_s": seconds[0],
        "lookup_s_per_batch": sum(clean) / len(clean),
        "duplicates_batch_s": seconds[dup],
        "found": (scanned, found),
        "rss_mb": (rss, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def render(m: dict) -> str:
    ms = m["lookup_s_per_batch"] * 1000
    verdict = "MET" if ms <= TARGET_MS else "MISSED"
    return "\n".join(
        [
            f"\nKnown request ids against {m['rows']:,} rows of history (per 1,000-id batch, 5 duplicates in one):",
            f"  scan of prompt_rows per batch (the old check): {m['scan_s_per_batch'] * 1000:.0f} ms",
            f"  hashes read once: first batch {m['first_batch_s'] * 1000:.0f} ms (reads them), then {ms:.0f} ms a batch"
            f"   target <= {TARGET_MS} ms   {verdict}",
            f"  the batch with 5 ids of the latest day again (confirmed against that day's rows): "
            f"{m['duplicates_batch_s'] * 1000:.0f} ms",
            f"  duplicates found {m['found'][0]} / {m['found'][1]}; peak RSS {m['rss_mb'][0]:.0f} -> "
            f"{m['rss_mb'][1]:.0f} MB",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench-known")
    p.add_argument("--rows", type=int, default=10_000_000)
    a = p.parse_args(argv)
    print(render(measure(a.work, a.rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
