"""`--workers 2` versus 1 on four days: the nightly job over a four-day range, judge on (the offline
judge: the step that dominates a night with the support gate on), each run in a fresh process on a fresh
warehouse, the two worker counts alternated so drifting load hits both alike.

    python -m benchmarks.workers [--work DIR] [--requests 2500] [--repeats 2] [--quick]

Each run is `citegate run --workers N` (pipeline.run_range with workers=N): with 1, one run over the range; with 2,
ingest on 2 parse processes, then the four day partitions two at a time, each its own run and process, then the
metrics and the publish (day_runs.py, docs/scaling.md "Day partitions side by side"). Step times are summed over the
day runs."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks import cores

ROOT = Path(__file__).resolve().parents[1]
START = "2026-11-02"
DAYS = 4
TARGET = 1.6
CONFIG = """
[surfaces.default]
stakes = "high"

[ingest]
workers = {workers}

[judge]
workers = {workers}
"""


def run_once(work: Path, landing: Path, workers: int, tag: str) -> dict:
    run_dir = work / f"w{workers}-{tag}"
    if run_dir.exists():  # a fresh warehouse each time (an earlier bench's run)
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    (run_dir / "citegate.toml").write_text(CONFIG.format(workers=workers))
    home = run_dir / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((ROOT / "dagster_home" / "dagster.yaml").read_text())
    code = (
        "import json, os, resource, time\n"
        "from datetime import date, timedelta\n"
        "from pathlib import Path\n"
        "from citegate_assets.pipeline import RunPlan, run_range\n"
        "if __name__ == '__main__':\n"
        f"    start = date.fromisoformat({START!r})\n"
        "    t0, c0 = time.perf_counter(), os.times()\n"
        f"    r = run_range(RunPlan(start, start + timedelta(days={DAYS - 1})), landing=Path({str(landing)!r}),\n"
        f"        warehouse=Path({str(run_dir / 'warehouse.duckdb')!r}),\n"
        f"        config_file=Path({str(run_dir / 'citegate.toml')!r}), log_level='ERROR', workers={workers})\n"
        "    s, c = time.perf_counter() - t0, os.times()\n"
        "    steps = {}\n"
        "    for e in r.all_events:  # summed over the day runs when the days run side by side\n"
        "        if e.event_type_value == 'STEP_SUCCESS':\n"
        "            steps[e.step_key] = steps.get(e.step_key, 0) + e.event_specific_data.duration_ms / 1000\n"
        "    print(json.dumps({'seconds': s, 'success': r.success, 'steps': steps,\n"
        "        'cpu_s': c.user + c.system - c0.user - c0.system,\n"
        "        'children_cpu_s': c.children_user + c.children_system - c0.children_user - c0.children_system,\n"
        "        'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
    )
    script = run_dir / "run.py"  # a file, not -c: spawned workers re-import the main module by its path
    script.write_text(code)
    env = {**os.environ, "DAGSTER_HOME": str(home), "CITEGATE_FIRST_DAY": START, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"workers={workers} run failed:\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if not result["success"]:
        raise RuntimeError(f"workers={workers}: the nightly run over {DAYS} days did not succeed")
    return result


def measure(work: Path, requests: int = 2500, repeats: int = 2, prompt_kb: int = 8) -> dict:
    from citegate_assets.lib.loggen import generate_logs

    work.mkdir(parents=True, exist_ok=True)
    landing = work / f"landing-{DAYS}x{requests}"
    stamp = landing / ".requests"
    if not (stamp.exists() and stamp.read_text() == f"{requests}:{prompt_kb}"):
        print(f"  generating {DAYS} days x {requests:,} requests into {landing} …", flush=True)
        generate_logs(
            landing,
            days=DAYS,
            requests_per_day=requests,
            seed=4,
            malformed=False,
            prompt_kb=prompt_kb,
            start_date=START,
        )
        stamp.write_text(f"{requests}:{prompt_kb}")
    runs: dict[int, list[dict]] = {1: [], 2: []}
    for i in range(repeats):
        for workers in (1, 2) if i % 2 == 0 else (2, 1):
            print(f"  {DAYS} days, workers={workers}, run {i + 1}/{repeats} …", flush=True)
            runs[workers].append(run_once(work, landing, workers, str(i)))
    return {"requests_per_day": requests, "days": DAYS, "runs": runs}


def seconds(runs: list[dict]) -> str:
    return ", ".join(f"{r['seconds']:.1f}" for r in runs)


def render(m: dict) -> str:
    one = statistics.median(r["seconds"] for r in m["runs"][1])
    two = statistics.median(r["seconds"] for r in m["runs"][2])
    ratio = one / two
    lines = [
        f"\n--workers 2 versus 1: the nightly job over {m['days']} days of {m['requests_per_day']:,} requests, "
        "offline judge on every citation",
        f"  workers=1: {seconds(m['runs'][1])} s (median {one:.1f})",
        f"  workers=2: {seconds(m['runs'][2])} s (median {two:.1f})",
        f"  speed-up {ratio:.2f}x   target >= {TARGET}x   {'MET' if ratio >= TARGET else 'MISSED'}",
    ]
    for workers in (1, 2):
        steps = m["runs"][workers][0]["steps"]
        top = sorted(steps.items(), key=lambda kv: -kv[1])[:5]
        lines.append(f"  workers={workers} slowest steps: " + ", ".join(f"{k} {v:.1f}s" for k, v in top))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench-workers")
    p.add_argument("--requests", type=int, default=2500)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="4 x 200 requests, 1 repeat: checks the harness only")
    a = p.parse_args(argv)
    if a.quick:
        a.requests, a.repeats = 200, 1
    m = measure(a.work, a.requests, a.repeats)
    print(render(m))
    print("  " + cores.render(cores.measure()))  # the ceiling: what two processes buy on this machine
    (a.work / "results.json").write_text(json.dumps(m, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
