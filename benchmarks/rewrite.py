"""What removing text costs now that the working file is rewritten afterwards (docs/retention.md, "The working file"):
a history of DAYS x REQUESTS generated requests built by one `citegate run`, then three retention nights (one day
dropped each: the update, then the rewrite), a night with nothing to drop, and one `citegate forget` (its warehouse
part, then the rewrite). The rewrite's cost is the whole file's, whatever was removed: MB/s is reported with it.

    python -m benchmarks.rewrite [--days 30] [--requests 2000] [--prompt-kb 4] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.history import START, generate_history

ROOT = Path(__file__).resolve().parents[1]


def build(work: Path, days: int, requests: int, prompt_kb: int) -> Path:
    """The warehouse after one run over every day (reused while the sizes stay the same)."""
    from citegate_assets.pipeline import RunPlan, run_range

    files = generate_history(work / f"history-{days}x{requests}", days, requests, prompt_kb)
    built = work / f"rewrite-{days}x{requests}"
    warehouse = built / "w.duckdb"
    if warehouse.exists():
        return warehouse
    shutil.rmtree(built, ignore_errors=True)
    landing, home = built / "landing", built / "dagster_home"
    landing.mkdir(parents=True)
    home.mkdir()
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    for file in files:
        shutil.copy(file, landing / file.name)
    os.environ["DAGSTER_HOME"] = str(home)
    plan = RunPlan(START, START + timedelta(days=days - 1))
    if not run_range(plan, landing=landing, warehouse=warehouse, config_file=None).success:
        raise RuntimeError("the run over the history failed")
    return warehouse


def measure(warehouse: Path) -> dict:
    from citegate_assets.lib.retention.drop_text import apply_retention
    from citegate_assets.lib.retention.forget import forget_in_warehouse
    from citegate_assets.lib.storage.file_rewrite import rewrite_if_text_removed
    from citegate_assets.lib.storage.warehouse import connect, ensure_schema

    now = datetime.now(UTC)
    with connect(warehouse) as con:
        ensure_schema(con)
    nights = []
    for first in (START, START + timedelta(days=1), START + timedelta(days=2)):
        text_days = (now.date() - first).days - 1  # the cutoff is the next day: `first` is dropped
        t0 = time.perf_counter()
        with connect(warehouse) as con:
            dropped = apply_retention(con, text_days, now)
        t1 = time.perf_counter()
        done = rewrite_if_text_removed(warehouse)
        t2 = time.perf_counter()
        assert done is not None and [str(d) for d in dropped] == [str(first)]
        nights.append(_figures(t1 - t0, t2 - t1, done.bytes_before, done.bytes_after))
    t0 = time.perf_counter()
    with connect(warehouse) as con:
        apply_retention(con, (now.date() - START).days - 3, now)
    t1 = time.perf_counter()
    assert rewrite_if_text_removed(warehouse) is None
    quiet = {"retention_s": round(t1 - t0, 3), "rewrite_check_s": round(time.perf_counter() - t1, 3)}
    with connect(warehouse, read_only=True) as con:
        [(request_id,)] = con.sql(
            "select min(request_id) from prompt_rows where day = $d", params={"d": START + timedelta(days=10)}
        ).fetchall()
    t0 = time.perf_counter()
    with connect(warehouse) as con:
        forget_in_warehouse(con, [request_id], by="benchmark", reason=None, now=now)
    t1 = time.perf_counter()
    done = rewrite_if_text_removed(warehouse)
    assert done is not None
    forget = _figures(t1 - t0, time.perf_counter() - t1, done.bytes_before, done.bytes_after)
    return {"retention_nights": nights, "night_without_removal": quiet, "forget_one_request": forget}


def _figures(update_s: float, rewrite_s: float, before: int, after: int) -> dict:
    return {
        "update_s": round(update_s, 2),
        "rewrite_s": round(rewrite_s, 2),
        "file_mb_before": round(before / 1e6, 1),
        "file_mb_after": round(after / 1e6, 1),
        "rewrite_mb_per_s": round(before / 1e6 / rewrite_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--prompt-kb", type=int, default=4)
    parser.add_argument("--work", type=Path, default=Path("/tmp/citegate-bench"))
    args = parser.parse_args()
    warehouse = build(args.work, args.days, args.requests, args.prompt_kb)
    scratch = args.work / "rewrite-scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(warehouse.parent, scratch, ignore=shutil.ignore_patterns("landing", "dagster_home"))
    print(json.dumps(measure(scratch / "w.duckdb"), indent=1))


if __name__ == "__main__":
    main()
