import os
import tempfile
from pathlib import Path

import pytest

from citegate_assets.lib.config import load_config, parse_config
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

PROJECT = Path(__file__).resolve().parents[1]

# Where tests write their files. Each Dagster event is a SQLite commit and each commit an fsync: on a disk that is
# most of a pipeline run (3 s of RAM against 9 s of disk for a one-day run on the 2-core machine), so tmp_path goes
# to a RAM-backed folder when there is one with room. CITEGATE_TEST_TMP names another folder ("" for the system's).
TEST_TMP_ENV = "CITEGATE_TEST_TMP"
RAM_FOLDER = Path("/dev/shm")
RAM_FOLDER_MIN_FREE = 8 << 30  # a run holds only its running tests' folders (tmp_path_retention_policy "failed")


def temp_root_for_tests() -> Path | None:
    """The folder tests' temporary files go under; None for the system's temp folder."""
    chosen = os.environ.get(TEST_TMP_ENV)
    if chosen is not None:
        return Path(chosen) if chosen else None
    try:
        fs = os.statvfs(RAM_FOLDER)
    except OSError:
        return None
    usable = os.access(RAM_FOLDER, os.W_OK | os.X_OK) and not fs.f_flag & os.ST_NOEXEC  # tests run venvs' pythons
    return RAM_FOLDER if usable and fs.f_bavail * fs.f_frsize >= RAM_FOLDER_MIN_FREE else None


_root = temp_root_for_tests()
if _root is not None:  # before any temp folder is made, in pytest, its workers and the processes tests start
    _root.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(_root)
    tempfile.tempdir = str(_root)

# The files that take longest, started first: with --dist loadfile a file runs on one worker, and a long file
# started last would run alone at the end (xdist's own order, most tests first, starts one-test files last).
SLOWEST_FIRST = (  # by the time each file took in a whole run, the system tests' files among them
    "test_crash_safety.py",
    "test_day_runs.py",
    "test_lake_s3.py",
    "test_judge_faults.py",
    "test_ingest_shards.py",
    "test_ui_backfill.py",
    "test_label_web.py",
    "test_bad_input_corpus.py",
    "test_own_labels.py",
    "test_publish_requests.py",
    "test_nightly.py",
    "test_metrics_pipeline.py",
    "test_estimate.py",
    "test_forget.py",
    "test_folders.py",
    "test_queue.py",
    "test_pipeline.py",
    "test_incremental_metrics.py",
    "test_review_web_browser.py",
    "test_cascade.py",
    "test_judge_batch.py",
    "test_ingest_workers.py",
    "test_review_web_http.py",
    "test_review_web_limits.py",
    "test_settings.py",
    "test_trace_bounds.py",
    "test_instance_postgres.py",
    "test_no_text_left.py",
    "test_cli_friction.py",
    "test_agreement.py",
    "test_publish_lake.py",
    "test_run_lock.py",
    "test_judge_secrets.py",
    "test_support_pipeline.py",
    "test_cli_imports.py",
    "test_lake.py",
)


# The system tests (marker `system`, `make test-system`; CI runs them after `make test`): each file starts a
# service (the local S3 server, PostgreSQL, headless Chromium, `dagster dev`), kills a process mid-run, runs
# processes side by side on one warehouse, or injects faults into a live judge server. Together they took nearly
# half of the whole suite's time, and `make test` without them needs no service installed.
SYSTEM_TESTS = frozenset(
    {
        "test_crash_safety.py",
        "test_day_runs.py",
        "test_deploy.py",
        "test_ingest_shards.py",
        "test_instance_postgres.py",
        "test_judge_faults.py",
        "test_label_web.py",
        "test_lake_s3.py",
        "test_publish_requests.py",
        "test_review_web_browser.py",
        "test_ui_backfill.py",
    }
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order
    for item in items:
        if item.path.name in SYSTEM_TESTS:
            item.add_marker(pytest.mark.system)


@pytest.fixture
def config():
    return parse_config({}, None)


@pytest.fixture
def demo_config():
    return load_config(PROJECT / "citegate.toml")


@pytest.fixture
def con(tmp_path):
    with connect(tmp_path / "warehouse.duckdb") as c:
        ensure_schema(c)
        yield c


@pytest.fixture
def landing(tmp_path):
    path = tmp_path / "landing"
    path.mkdir()
    return path


@pytest.fixture
def dagster_home(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text((PROJECT / "dagster_home" / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home
