"""A day's ingest split across 2 shard processes versus one ingest of the same files: total CPU of every process
(the shards, their parse workers, the collect step), and whether every ingest table came out the same.

    python -m benchmarks.shards [--work DIR] [--requests 20000] [--prompt-kb 15] [--repeats 2]

The day is FILES landing files, as a log rotated through the day writes it: shards split a day by file, so a day in
one file would leave one shard all the work. Each ingest runs in a fresh process on a fresh warehouse
(benchmarks/stages.py ingest_shards), the two alternated so drifting load hits both alike. Target: the 2-shard ingest
within 1.15x the CPU of the 1-shard one (the work is split, not repeated)."""

from __future__ import annotations

import argparse
import shutil
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.15
FILES = 8  # the day's landing files: a log rotated every 3 hours
CONFIG = """
[surfaces.default]
stakes = "off"
"""


def measure(work: Path, requests: int = 20_000, prompt_kb: int = 15, repeats: int = 2) -> dict:
    from benchmarks.bench import fresh, generate, stage

    work.mkdir(parents=True, exist_ok=True)
    generated = work / f"landing-{requests}"
    generate(generated, requests, prompt_kb)
    landing = rotated(generated, work / f"landing-{requests}-{FILES}-files", FILES)
    config = work / "shards.toml"
    config.write_text(CONFIG)
    runs: dict[int, list[dict]] = {1: [], 2: []}
    same = None
    for i in range(repeats):
        for shards in (1, 2) if i % 2 == 0 else (2, 1):
            print(f"  ingest of {requests:,} requests, shards={shards}, run {i + 1}/{repeats} …", flush=True)
            staging = work / f"staging-{shards}"
            shutil.rmtree(staging, ignore_errors=True)
            runs[shards].append(
                stage(
                    "ingest_shards",
                    warehouse=fresh(work / f"shards-{shards}.duckdb"),
                    landing=landing,
                    config=config,
                    shards=shards,
                    staging=staging,
                )
            )
        same = stage("same_tables", a=work / "shards-1.duckdb", b=work / "shards-2.duckdb")
    return {"requests": requests, "prompt_kb": prompt_kb, "runs": runs, "same": same}


def rotated(source: Path, target: Path, files: int) -> Path:
    """The generated day (one file) as `files` files of consecutive lines, once."""
    done = target / ".from"
    stamp = (source / ".requests").read_text() + f":{files}"
    if done.exists() and done.read_text() == stamp:
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    [day] = sorted(source.glob("*.jsonl"))
    lines = day.read_bytes().splitlines(keepends=True)
    step = -(-len(lines) // files)
    for n in range(files):
        (target / f"{day.stem}-{n:02d}.jsonl").write_bytes(b"".join(lines[n * step : (n + 1) * step]))
    done.write_text(stamp)
    return target


def _cpu(runs: list[dict]) -> str:
    return ", ".join(f"{r['cpu_s']:.1f}" for r in runs)


def render(m: dict) -> str:
    one = statistics.median(r["cpu_s"] for r in m["runs"][1])
    two = statistics.median(r["cpu_s"] for r in m["runs"][2])
    ratio = two / one
    ok = "ok" if ratio <= TARGET and m["same"]["identical"] else "MISSED"
    wall = {n: statistics.median(r["seconds"] for r in m["runs"][n]) for n in (1, 2)}
    return "\n".join(
        [
            f"\ningest split across shards: {m['requests']:,} requests of ~{m['prompt_kb']} KB in {FILES} files, "
            "CPU s of every process",
            f"  1 shard:  {_cpu(m['runs'][1])} (median {one:.1f}); wall {wall[1]:.1f} s",
            f"  2 shards: {_cpu(m['runs'][2])} (median {two:.1f}); wall {wall[2]:.1f} s",
            f"  2-shard / 1-shard CPU: {ratio:.2f}x (target <= {TARGET}x), tables identical: "
            f"{m['same']['identical']} {m['same']['tables_differing'] or ''}  [{ok}]",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench")
    p.add_argument("--requests", type=int, default=20_000)
    p.add_argument("--prompt-kb", type=int, default=15)
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args(argv)
    print(render(measure(a.work, a.requests, a.prompt_kb, a.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
