"""Page loads of the review web page for a queue of 50,000 entries; target: each under 300 ms.

A real run of two generated days gives the published copy; its queue is then copied out to 50,000 entries
(new citation ids, the same prompts and days, a third of them decided). `citegate serve` runs in
its own process on 127.0.0.1 and every page is fetched over HTTP with a signed-in session.

    python -m benchmarks.review_page [--entries 50000] [--repeats 20] [--work DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode

from benchmarks.sample_run import generated_run

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 300.0


def base_run(work: Path) -> Path:
    """A published copy from a real pipeline run (built once per work folder)."""
    root = work / "review-base"
    published = root / "w.published.duckdb"
    if published.exists():
        return published
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    generated_run(root, days=2, requests_per_day=200, seed=3)
    return published


def inflate(published: Path, target: Path, entries: int) -> int:
    """A copy of the published warehouse whose queue holds `entries` rows; returns the count. The queue is a view
    over one Parquet file, as the published copy reads its lake partitions (lib/storage/lake.py)."""
    import duckdb

    from citegate_assets.lib.storage.warehouse import sql_literal

    shutil.copy(published, target)
    queue_file = target.with_name(target.stem + ".citation_queue.parquet")
    con = duckdb.connect(str(target))
    try:
        [(have,)] = con.sql("select count(*) from citation_queue").fetchall()
        copies = -(-entries // have)
        con.execute(
            f"""
            copy (
                select * replace (
                           citation_id || '~' || lpad(c::varchar, 4, '0') as citation_id,
                           case when c % 3 = 1 then 'accepted' else status end as status
                       )
                from citation_queue, range({int(copies)}) t(c)
                order by c, citation_id
                limit {int(entries)}
            ) to {sql_literal(queue_file)} (format parquet)
            """
        )
        con.execute("drop view if exists citation_queue")
        con.execute("drop table if exists citation_queue")
        con.execute(f"create view citation_queue as select * from read_parquet({sql_literal(queue_file)})")
        [(count,)] = con.sql("select count(*) from citation_queue").fetchall()
    finally:
        con.close()
    return count


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure(work: Path, entries: int = 50_000, repeats: int = 20) -> dict:
    """Median and p95 milliseconds per page; starts and stops its own server."""
    import requests

    work.mkdir(parents=True, exist_ok=True)
    target = work / "review-50k.published.duckdb"
    count = inflate(base_run(work), target, entries)
    port = free_port()
    reviews = work / "review-50k.reviews"
    command = [sys.executable, "-m", "citegate_assets.cli", "serve", "--warehouse", str(work / "review-50k.duckdb")]
    command += ["--published", str(target), "--reviews", str(reviews), "--config", "<built-in>", "--port", str(port)]
    access = secrets.token_urlsafe(32)  # local mode's access token, given rather than read from the server's output
    env = {**os.environ, "CITEGATE_REVIEW_TOKEN": access}
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        session = requests.Session()
        login = session.get(f"{base}/login", params={"token": access}).text
        token = re.search(r'name="csrf" value="([^"]+)"', login)
        assert token is not None
        session.post(f"{base}/login", data={"csrf": token.group(1), "reviewer": "bench", "next": "/"})
        import duckdb

        con = duckdb.connect(str(target), read_only=True)
        try:
            ordered = con.sql("select reason, day, citation_id from citation_queue order by 1, 2, 3").fetchall()
            [(reason,)] = con.sql(
                "select reason from citation_queue group by 1 order by count(*) desc limit 1"
            ).fetchall()
            [(surface, week)] = con.sql(
                "select surface, strftime(max(day), '%Y-%m-%d') from citation_queue "
                "group by 1 order by count(*) desc limit 1"
            ).fetchall()
            [(metric, cell_surface, cell_week)] = con.sql(
                "select metric, surface, strftime(week_start, '%Y-%m-%d') from weekly_surface_metrics "
                "where metric = 'provenance_pass_rate' order by denominator desc limit 1"
            ).fetchall()
        finally:
            con.close()
        deep = ordered[int(len(ordered) * 0.8)]
        middle = ordered[len(ordered) // 2][2]
        pages = {
            "queue, first page": "/",
            "queue, filtered (reason, surface, status, week)": "/?"
            + urlencode({"reason": reason, "surface": surface, "status": "open", "week": week}),
            "queue, page at entry 40,000 (keyset)": "/?"
            + urlencode({"k_reason": deep[0], "k_day": deep[1].isoformat(), "k_id": deep[2]}),
            "entry page": "/entry?" + urlencode({"id": middle}),
            "metrics page": "/metrics",
            "trace page": "/trace?" + urlencode({"metric": metric, "surface": cell_surface, "week": cell_week}),
        }
        session.get(f"{base}/chart.png")  # drawn once per published copy, then cached
        out: dict[str, dict] = {}
        for name, path in pages.items():
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                response = session.get(f"{base}{path}")
                times.append((time.perf_counter() - t0) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"{path}: HTTP {response.status_code}")
            times.sort()
            out[name] = {
                "median_ms": statistics.median(times),
                "p95_ms": times[int(0.95 * (len(times) - 1))],
                "max_ms": times[-1],
            }
        return {"entries": count, "repeats": repeats, "pages": out}
    finally:
        server.terminate()
        server.wait(timeout=10)


def render(result: dict) -> str:
    head = f"review page, {result['entries']:,} queue entries, {result['repeats']} loads each"
    lines = [f"{head} (ms; target < {TARGET_MS:.0f})"]
    for name, t in result["pages"].items():
        verdict = "MET" if t["p95_ms"] < TARGET_MS else "MISSED"
        lines.append(
            f"  {name:<52} median {t['median_ms']:7.1f}  p95 {t['p95_ms']:7.1f}  max {t['max_ms']:7.1f}  {verdict}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=50_000)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench")
    a = p.parse_args(argv)
    result = measure(a.work, a.entries, a.repeats)
    print(render(result))
    return 0 if all(t["p95_ms"] < TARGET_MS for t in result["pages"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
