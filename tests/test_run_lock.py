"""Two runs at once: the second waits or stops with a clear message; nothing is corrupted.
The warehouse is created readable by its owner only."""

import stat
import subprocess
import sys
import textwrap
import time
from datetime import date

import pytest

from citegate_assets.cli import main
from citegate_assets.lib.runlock import RunLockedError, run_lock
from citegate_assets.lib.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import scenario_record, write_jsonl


def hold_lock(warehouse, seconds):
    """Another process holding the run lock (as a running `citegate run` does)."""
    code = textwrap.dedent(
        f"""
        import time, pathlib
        from citegate_assets.lib.runlock import run_lock
        with run_lock(pathlib.Path({str(warehouse)!r})):
            print("held", flush=True)
            time.sleep({seconds})
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_second_run_stops_with_a_clear_message(tmp_path, landing, dagster_home, capsys):
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text")])
    warehouse = tmp_path / "w.duckdb"
    holder = hold_lock(warehouse, 5)
    try:
        with pytest.raises(RunLockedError, match=r"another citegate run is writing this warehouse \(pid \d+ since"):
            run_range(RunPlan(date(2026, 11, 2), date(2026, 11, 2)), landing=landing, warehouse=warehouse, config_file=None)
        assert main(["run", "--logs", str(landing), "--warehouse", str(warehouse), "--quiet"]) == 2
        assert "another citegate run is writing this warehouse" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert not warehouse.exists()  # the refused runs touched nothing


def test_second_run_waits_when_asked_and_then_runs(tmp_path, landing, dagster_home, capsys):
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text")])
    warehouse = tmp_path / "w.duckdb"
    holder = hold_lock(warehouse, 1.5)
    t0 = time.monotonic()
    assert main(["run", "--logs", str(landing), "--warehouse", str(warehouse), "--quiet", "--wait", "60"]) == 0
    assert time.monotonic() - t0 >= 1.0
    assert "waiting for the run that holds" in capsys.readouterr().out
    holder.wait()
    with connect(warehouse, read_only=True) as con:
        assert con.sql("select count(*) from provenance_results").fetchall() == [(8,)]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    warehouse = tmp_path / "w.duckdb"
    holder = hold_lock(warehouse, 60)
    holder.kill()  # SIGKILL: the kernel releases the flock
    holder.wait()
    with run_lock(warehouse):
        pass


def test_warehouse_is_readable_by_its_owner_only(tmp_path):
    path = tmp_path / "w.duckdb"
    with connect(path):
        pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
