"""A built wheel works from an empty folder: SQL, demo labels, dagster.yaml and the metrics lock are package
data, and every default path is relative to the current directory, not to the package.

The wheel is built from a copy of the sources (the shared tree gets no build/ folder), installed with
--no-deps into a fresh venv whose dependencies come from this project's venv through a .pth file.
Building needs setuptools from the package index or the local wheel cache: the test is skipped only
when neither can be reached."""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import duckdb
import pytest

PROJECT = Path(__file__).resolve().parents[1]
OFFLINE = re.compile(
    r"No matching distribution found for setuptools|Could not find a version that satisfies the requirement setuptools"
    r"|NewConnectionError|Temporary failure in name resolution|Network is unreachable",
    re.I,
)

pytestmark = pytest.mark.wheel


def _sh(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=240, **kw)


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(PROJECT / name, src / name)
    for name in ("citegate_assets", "sql", "labels"):  # the package's symlinks point into sql/ and labels/
        shutil.copytree(PROJECT / name, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    (src / "dagster_home").mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", src / "dagster_home" / "dagster.yaml")

    built = _sh([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp / "dist", src])
    if built.returncode != 0 and OFFLINE.search(built.stdout + built.stderr):
        pytest.skip(f"no package index or pip cache to build with: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp / "dist").glob("citegate-*.whl")

    env_dir = tmp / "venv"
    made = _sh([sys.executable, "-m", "venv", "--without-pip", env_dir])
    assert made.returncode == 0, made.stderr
    python = env_dir / "bin" / "python"
    # install first, then let it see the dependencies: pip must not see (and never touch) the project's venv
    installed = _sh(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel]
    )
    assert installed.returncode == 0, installed.stderr
    site = Path(_sh([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_citegate_test_deps.pth").write_text("".join(f"{p}\n" for p in sorted(deps)))
    return env_dir


def _clean_env(venv: Path) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CITEGATE_") and k not in ("DAGSTER_HOME", "PYTHONPATH", "VIRTUAL_ENV")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_wheel_runs_the_pipeline_from_an_empty_folder(venv, tmp_path):
    work = tmp_path / "empty"
    work.mkdir()
    env = _clean_env(venv)
    where = _sh(
        [venv / "bin" / "python", "-c", "import citegate_assets; print(citegate_assets.__file__)"], cwd=work, env=env
    )
    assert where.returncode == 0 and where.stdout.startswith(str(venv)), where.stdout + where.stderr

    gen = _sh(
        [venv / "bin" / "citegate", "gen-logs", "--out", "landing", "--days", "2", "--requests-per-day", "20"],
        cwd=work,
        env=env,
    )
    assert gen.returncode == 0, gen.stderr
    records = int(re.search(r"records=(\d+)", gen.stdout).group(1))

    run = _sh(
        [venv / "bin" / "citegate", "run", "--logs", "landing", "--warehouse", "wh.duckdb", "--quiet"],
        cwd=work,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "config:       built-in defaults (no config file)" in run.stdout
    assert (
        f"dagster home: {work.resolve() / 'dagster_home'}  (default: dagster_home/ beside the warehouse)" in run.stdout
    )
    with duckdb.connect(str(work / "wh.duckdb"), read_only=True) as con:
        # every valid record written is a prompt; so is each malformed line whose answer alone is bad (its
        # prompt is kept, its citations go to answer_rejects)
        [(answer_rejects,)] = con.sql("select count(*) from answer_rejects").fetchall()
        assert con.sql("select count(*) from prompts").fetchall() == [(records + answer_rejects,)]
        assert (
            con.sql("select count(*) from prompts").fetchall()
            == con.sql("select sum(records_ingested)::bigint from ingested_files").fetchall()
        )
        assert con.sql("select count(*) from provenance_results").fetchall()[0][0] > 0
        assert (
            con.sql("select count(*) from metric_definitions where in_lock").fetchall()[0][0] > 0
        )  # the packaged lock
    assert (work / "wh.published.duckdb").is_file()
    assert (work / "dagster_home" / "dagster.yaml").is_file()
    assert not (work / "data").exists()  # the flags were followed; nothing lands in the package either

    metrics = _sh([venv / "bin" / "citegate", "metrics", "--warehouse", "wh.duckdb"], cwd=work, env=env)
    assert metrics.returncode == 0 and "provenance_pass_rate v1" in metrics.stdout, metrics.stderr
    lock = _sh([venv / "bin" / "citegate", "metrics", "--lock"], cwd=work, env=env)
    assert lock.returncode == 2 and "source checkout" in lock.stderr
