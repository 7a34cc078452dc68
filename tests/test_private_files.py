"""Files holding prompt text are created owner-only, whatever the caller's umask; a killed publish's temporaries go."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from citegate_assets.lib.storage.publish import remove_stale_temporaries

from .helpers import scenario_record, write_jsonl

PROJECT = Path(__file__).resolve().parents[1]


def _open_to_others(root: Path) -> list[str]:
    loose = []
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            loose.append(f"{path.relative_to(root)} {stat.filemode(mode)}")
    return loose


def test_a_run_creates_nothing_readable_by_others(tmp_path):
    landing, out = tmp_path / "landing", tmp_path / "out"
    landing.mkdir()
    write_jsonl(landing / "a.jsonl", [scenario_record("plain-list", "text", request_id=f"r{i}") for i in range(3)])
    published = out / "wh.published.duckdb"
    out.mkdir(mode=0o700)
    stale = [out / "wh.published.duckdb.tmp-999999999", out / "wh.published.duckdb.tmp-999999999.wal"]
    for path in stale:  # what a publish killed with -9 leaves behind
        path.write_text("prompt text")
    env = {**os.environ, "DAGSTER_HOME": str(out / "dagster_home")}
    (out / "dagster_home").mkdir(mode=0o700)
    (out / "dagster_home" / "dagster.yaml").write_text((PROJECT / "dagster_home" / "dagster.yaml").read_text())
    (out / "dagster_home" / "dagster.yaml").chmod(0o600)  # written by this test; everything else by citegate
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "citegate_assets.cli",
            "run",
            "--logs",
            str(landing),
            "--warehouse",
            str(out / "wh.duckdb"),
            "--config",
            str(PROJECT / "citegate.toml"),
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=lambda: os.umask(0o022),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert published.exists()
    assert not any(p.exists() for p in stale)
    assert (out / "dagster_home" / "storage").exists()
    assert _open_to_others(out) == []


def test_stale_temporaries_of_live_publishes_are_kept(tmp_path):
    target = tmp_path / "wh.published.duckdb"
    mine = tmp_path / f"wh.published.duckdb.tmp-{os.getppid()}"  # a live process (the test runner's parent)
    gone = tmp_path / "wh.published.duckdb.tmp-999999999"
    for path in (mine, gone, gone.with_name(gone.name + ".wal")):
        path.write_text("x")
    removed = remove_stale_temporaries(target)
    assert sorted(p.name for p in removed) == sorted([gone.name, gone.name + ".wal"])
    assert mine.exists()
