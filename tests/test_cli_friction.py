"""What a newcomer trips on, each answered: a filter naming an unknown reason or surface is refused with the known
ones; a request id typed where a citation id is wanted gets that request's ids; a warehouse moved without its lake
or text folder is one message naming the folder; the run summary shows calibration tables only with rows; the UI's
partitions start at the first day with data; `citegate run` and `make ui` share the project's Dagster home; `make ui
PORT=…`; `serve` prints only the paths the page uses."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from citegate_assets.cli import main
from citegate_assets.lib.core import paths as where
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.report_view import summarize
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan
from tests.helpers import run_once

ROOT = Path(__file__).resolve().parents[1]
PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 3))


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Two days of sample logs run once into root/w.duckdb (and its published copy, lake and text folder)."""
    root = tmp_path_factory.mktemp("friction")
    generate_logs(root / "landing", days=2, requests_per_day=40, seed=5)
    run_once(root, PLAN)
    return root


def _published(root: Path) -> list[str]:
    return ["--published", str(root / "w.published.duckdb")]


def _rows(path: Path, sql: str) -> list[tuple]:
    with connect(path, read_only=True) as con:
        return con.sql(sql).fetchall()


def test_an_unknown_queue_reason_exits_2_and_lists_the_known_ones(ran, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["queue", "--reason", "truncated", *_published(ran)])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "'truncated' is not one of" in err
    assert all(reason in err for reason in ("span_truncated", "support_partial", "fabricated_id"))


def test_a_mistyped_surface_exits_2_and_lists_the_surfaces_of_the_warehouse(ran, capsys):
    surfaces = sorted(s for (s,) in _rows(ran / "w.published.duckdb", "select distinct surface from prompts"))
    assert len(surfaces) > 1
    with pytest.raises(SystemExit) as refused:
        main(["queue", "--surface", surfaces[0] + "x", *_published(ran)])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert f"'{surfaces[0]}x' is not a surface of this warehouse; known: " in err
    assert all(f"'{surface}'" in err for surface in surfaces)
    assert main(["queue", "--surface", surfaces[0], *_published(ran)]) == 0  # a known surface still filters


def test_queue_show_of_a_request_id_suggests_its_citation_ids(ran, capsys):
    [(request_id, ids)] = _rows(
        ran / "w.published.duckdb",
        "select request_id, list(citation_id order by citation_id) from citation_queue group by request_id "
        "order by count(*) desc, request_id limit 1",
    )
    assert main(["queue", "show", request_id, *_published(ran)]) == 2
    err = capsys.readouterr().err
    assert f"'{request_id}' is a request id: its queue entries are " in err
    assert all(f"'{cid}'" in err for cid in ids[:5])
    assert main(["review", request_id, "accept", *_published(ran), "--reviews", str(ran / "no-reviews")]) == 2
    assert f"'{request_id}' is a request id" in capsys.readouterr().err
    assert not (ran / "no-reviews").exists()


def test_a_request_with_no_queue_entry_says_so(ran, capsys):
    [(request_id, n)] = _rows(
        ran / "w.published.duckdb",
        "select request_id, count(*) from citations where request_id not in (select request_id from citation_queue) "
        "group by request_id order by request_id limit 1",
    )
    assert main(["queue", "show", request_id, *_published(ran)]) == 2
    assert f"'{request_id}' is a request id: none of its {n} citations is in the queue" in capsys.readouterr().err


def test_a_published_copy_whose_lake_is_gone_is_one_message_naming_the_folder(tmp_path):
    generate_logs(tmp_path / "landing", days=1, requests_per_day=10, seed=3)
    run_once(tmp_path, RunPlan(date(2026, 11, 2), date(2026, 11, 2)))
    (tmp_path / "w.lake").rename(tmp_path / "lake-moved-away")
    done = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli", "queue", "--warehouse", str(tmp_path / "w.duckdb")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"citegate: error: {tmp_path / 'w.published.duckdb'}: its lake folder ")
    assert f"its lake folder {tmp_path / 'w.lake'} is missing" in lines[-1]
    assert "Traceback" not in done.stderr and "IOException" not in done.stderr


def test_a_warehouse_moved_without_its_text_folder_is_refused_naming_it(ran, tmp_path, capsys):
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy2(ran / "w.duckdb", moved / "w.duckdb")
    shutil.copytree(ran / "w.lake", moved / "w.lake")
    argv = ["run", "--logs", str(ran / "landing"), "--warehouse", str(moved / "w.duckdb"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{moved / 'w.duckdb'}: its text folder {moved / 'w.text'} is missing" in err
    assert not (moved / "w.text").exists() and not (moved / "dagster_home").exists()  # refused before anything ran


def test_the_run_summary_shows_calibration_tables_only_with_rows(ran):
    text = summarize(ran / "w.duckdb", PLAN)
    calibration = text.split("Judge calibration on hand labels", 1)[1]
    assert "no hand label judged yet: no calibration table" in calibration
    assert "Confusion matrix" not in calibration and "(no rows)" not in calibration
    assert "| judge_model" not in calibration and "| null" not in calibration
    assert re.search(r"^Support gate: ", calibration, re.MULTILINE)  # the one line on the gate stays


def test_the_partitions_start_at_the_first_day_with_data(ran, tmp_path):
    from citegate_assets.defs.partitions import first_day_with_data, first_partition_day

    assert first_day_with_data(ran / "w.published.duckdb") == date(2026, 11, 2)
    assert first_day_with_data(tmp_path / "none.duckdb") is None
    assert first_partition_day({}, first_data_day=date(2026, 11, 2)) == date(2026, 11, 2)
    assert first_partition_day({"CITEGATE_FIRST_DAY": "2026-10-01"}, first_data_day=date(2026, 11, 2)) == date(
        2026, 10, 1
    )
    probe = (
        "from datetime import datetime, timezone\n"
        "from citegate_assets.definitions import defs\n"
        "from citegate_assets.defs.partitions import daily_partitions\n"
        "defs().resolve_job_def('nightly_job')\n"
        "keys = daily_partitions.get_partition_keys(current_time=datetime(2026, 12, 5, tzinfo=timezone.utc))\n"
        "print(keys[0], len(keys))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEGATE_")}

    def first_and_count(**extra: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**env, "PYTHONPATH": str(ROOT), **extra},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    # what `dagster dev` loads from a folder whose warehouse holds 2026-11-02 .. 03: 33 days, not a year's
    assert first_and_count(CITEGATE_WAREHOUSE=str(ran / "w.duckdb")) == ["2026-11-02", "33"]
    assert first_and_count(CITEGATE_WAREHOUSE=str(ran / "w.duckdb"), CITEGATE_FIRST_DAY="2026-10-30") == [
        "2026-10-30",
        "36",
    ]
    # no warehouse yet: the definitions still load, from January 1 of the previous year
    assert first_and_count(CITEGATE_WAREHOUSE=str(tmp_path / "none.duckdb"))[0] == f"{date.today().year - 1}-01-01"


def test_run_and_make_ui_share_the_project_dagster_home():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "export DAGSTER_HOME := $(CURDIR)/dagster_home" in makefile  # what `make ui` runs in
    settings = where.resolve(env={}, cwd=ROOT)
    assert settings.dagster_home == (ROOT / "dagster_home").resolve()
    assert settings.sources["dagster_home"][1] == "default: the project's dagster_home/, the one `make ui` shows"
    elsewhere = where.resolve(env={}, cwd=ROOT, warehouse="/tmp/other/w.duckdb")  # another warehouse: its own home
    assert elsewhere.dagster_home == Path("/tmp/other/dagster_home")


def test_a_folder_that_is_not_a_project_keeps_the_home_beside_the_warehouse(tmp_path):
    (tmp_path / "dagster_home").mkdir()
    (tmp_path / "dagster_home" / "dagster.yaml").write_text("")
    assert where.resolve(env={}, cwd=tmp_path).dagster_home == tmp_path.resolve() / "data" / "dagster_home"
    (tmp_path / "workspace.yaml").write_text("")
    assert where.resolve(env={}, cwd=tmp_path).dagster_home == tmp_path.resolve() / "dagster_home"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_ui_takes_a_port():
    def command(*args: str) -> str:
        done = subprocess.run(["make", "-n", "ui", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
        return [line for line in done.stdout.splitlines() if "dagster dev" in line][-1]

    assert command().endswith("-h 127.0.0.1 -p 3000")
    assert command("PORT=3111").endswith("-h 127.0.0.1 -p 3111")


def test_serve_prints_only_the_paths_the_page_uses(ran):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:  # the port is taken: serve prints its paths and the URL, then stops
        done = subprocess.run(
            [sys.executable, "-m", "citegate_assets.cli", "serve", "--warehouse", str(ran / "w.duckdb")]
            + ["--port", str(port), "--config", where.BUILTIN_CONFIG],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        busy.close()
    names = [line.split(":", 1)[0] for line in done.stdout.splitlines() if not line.startswith("review page")]
    assert names == ["config", "warehouse", "published", "reviews", "labels"], done.stdout
    assert f"review page: http://127.0.0.1:{port}/?token=" in done.stdout
