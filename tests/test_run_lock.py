"""Two runs at once: the second waits or stops with a clear message; nothing is corrupted.
The warehouse is created readable by its owner only."""

import stat
import subprocess
import sys
import textwrap
import time
from datetime import date, datetime, timezone

import pytest

from citegate_assets.cli import main
from citegate_assets.lib.core.runlock import RunLockedError, run_lock
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import scenario_record, write_jsonl

# takes the run lock and lets it go at once: fails while another process holds it
PROBE = (
    "import pathlib; from citegate_assets.lib.core.runlock import run_lock\n"
    "with run_lock(pathlib.Path({warehouse!r})): pass"
)


def hold_lock(warehouse, seconds):
    """Another process holding the run lock (as a running `citegate run` does)."""
    code = textwrap.dedent(
        f"""
        import time, pathlib
        from citegate_assets.lib.core.runlock import run_lock
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
            run_range(
                RunPlan(date(2026, 11, 2), date(2026, 11, 2)), landing=landing, warehouse=warehouse, config_file=None
            )
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


def test_the_lock_is_reentrant_in_one_process_and_released_by_the_outermost(tmp_path):
    warehouse = tmp_path / "w.duckdb"
    with run_lock(warehouse):
        with run_lock(tmp_path / "." / "w.duckdb"):  # `citegate run` around its run's warehouse resource: no deadlock
            pass
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                PROBE.format(warehouse=str(warehouse)),
            ],
            capture_output=True,
            text=True,
        )
        assert "another citegate run is writing this warehouse" in probe.stderr  # still held after the inner one ended
    with run_lock(warehouse):  # released
        pass


def test_calibrate_stops_with_a_clear_message_while_a_run_holds_the_lock(tmp_path, dagster_home, capsys):
    warehouse = tmp_path / "w.duckdb"
    holder = hold_lock(warehouse, 10)
    try:
        assert main(["calibrate", "--warehouse", str(warehouse)]) == 2
        assert "another citegate run is writing this warehouse (pid" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert not warehouse.exists()  # it wrote nothing


def scheduled_run(landing, warehouse, monkeypatch):
    """nightly_job as the daemon runs it: the schedule's run request, the folders from the environment."""
    import dagster as dg

    from citegate_assets.definitions import defs

    monkeypatch.setenv("CITEGATE_LOGS", str(landing))
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("CITEGATE_LABELS", str(warehouse.with_name("no-labels")))
    d = defs()
    instance = dg.DagsterInstance.get()
    at_two = datetime(2026, 11, 3, 2, 0, tzinfo=timezone.utc)
    with dg.build_schedule_context(
        instance=instance, scheduled_execution_time=at_two
    ) as context:  # `with`: it resets what it set
        [request] = d.get_schedule_def("nightly_schedule").evaluate_tick(context).run_requests
    return d.resolve_job_def("nightly_job").execute_in_process(
        instance=instance, partition_key=request.partition_key, tags=request.tags, raise_on_error=False
    )


def test_a_scheduled_run_stops_with_a_clear_message_while_a_run_holds_the_lock(
    tmp_path, landing, dagster_home, monkeypatch
):
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text")])
    warehouse = tmp_path / "w.duckdb"
    monkeypatch.delenv("CITEGATE_LOCK_WAIT_S", raising=False)
    holder = hold_lock(warehouse, 10)
    try:
        result = scheduled_run(landing, warehouse, monkeypatch)
    finally:
        holder.kill()
        holder.wait()
    assert not result.success
    errors = [
        e.event_specific_data.error
        for e in result.all_events
        if e.is_failure and getattr(e.event_specific_data, "error", None)
    ]
    messages = [error.message + (error.cause.message if error.cause else "") for error in errors]
    assert any("another citegate run is writing this warehouse (pid" in m for m in messages), messages
    assert not warehouse.exists()  # refused before any step ran


def test_a_scheduled_run_waits_for_the_holder_when_asked(tmp_path, landing, dagster_home, monkeypatch):
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text")])
    warehouse = tmp_path / "w.duckdb"
    monkeypatch.setenv("CITEGATE_LOCK_WAIT_S", "60")
    holder = hold_lock(warehouse, 1.5)
    t0 = time.monotonic()
    result = scheduled_run(landing, warehouse, monkeypatch)
    assert result.success
    assert time.monotonic() - t0 >= 1.0
    holder.wait()
    with connect(warehouse, read_only=True) as con:
        assert con.sql("select count(*) from provenance_results").fetchall() == [(8,)]


def test_a_run_holds_the_lock_from_its_first_step_to_its_last(tmp_path, landing, dagster_home, monkeypatch):
    """While a scheduled run is between steps, `citegate run` cannot slip in (nor release its pool slots)."""
    import citegate_assets.defs.metrics as metrics_defs

    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text")])
    warehouse = tmp_path / "w.duckdb"
    seen = []
    real = metrics_defs.publish_lake

    def publish_and_probe(source, target, lake, **kwargs):
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                PROBE.format(warehouse=str(warehouse)),
            ],
            capture_output=True,
            text=True,
        )
        seen.append(probe.stderr)
        return real(source, target, lake, **kwargs)

    monkeypatch.setattr(metrics_defs, "publish_lake", publish_and_probe)
    assert scheduled_run(landing, warehouse, monkeypatch).success
    [stderr] = seen
    assert "another citegate run is writing this warehouse" in stderr
