"""A real nightly run over generated logs, in a folder of its own (landing/, dagster_home/, w.duckdb, reviews/): what
the review-page benchmark and the screenshot script start from."""

from __future__ import annotations

import os
import shutil
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def generated_run(root: Path, *, days: int, requests_per_day: int, seed: int, start: date = date(2026, 11, 2)) -> Path:
    """Generate `days` days of logs from `start` into root/landing and run the nightly job over them with the built-in
    config, the Dagster instance in root/dagster_home (set as DAGSTER_HOME for this process); the warehouse's path."""
    from citegate_assets.lib.loggen import generate_logs
    from citegate_assets.pipeline import RunPlan, run_range

    generate_logs(
        root / "landing", days=days, requests_per_day=requests_per_day, seed=seed, start_date=start.isoformat()
    )
    home = root / "dagster_home"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["CITEGATE_REVIEWS"] = str(root / "reviews")
    plan = RunPlan(start, start + timedelta(days=days - 1))
    warehouse = root / "w.duckdb"
    if not run_range(plan, landing=root / "landing", warehouse=warehouse, config_file=None).success:
        raise RuntimeError(f"the nightly run over {root / 'landing'} failed (Dagster home {home})")
    return warehouse
