"""The working DuckDB file is rewritten after a removal of text (lib/storage/file_rewrite.py, docs/retention.md): DuckDB
keeps
freed blocks as they were, so the removed text stays in the file's bytes until the rewrite; the rewrite keeps every
row and object, leaves no free block, is skipped when nothing was removed, refuses while this process still holds the
file, and a kill -9 in the middle of it leaves the old file usable and still marked."""

from __future__ import annotations

import os
import random
import signal
import stat
import string
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.retention.forget import forget_in_warehouse
from citegate_assets.lib.storage.file_rewrite import rewrite_if_text_removed
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

from .helpers import scenario_record, write_jsonl

PROJECT = Path(__file__).resolve().parents[1]
OBJECTS = (
    "select 'table', table_name, sql from duckdb_tables() where database_name = current_database() "
    "union all select 'view', view_name, sql from duckdb_views() where database_name = current_database() "
    "and not internal order by all"
)


def needle(rnd: random.Random) -> str:
    return "NEEDLE" + "".join(rnd.choice(string.ascii_letters) for _ in range(40))


def warehouse_with_claims(tmp_path: Path, config, requests: int, claim_repeat: int = 1) -> tuple[Path, dict]:
    """A warehouse whose citations' claims are distinctive text, one needle per request."""
    rnd = random.Random(5)
    landing = tmp_path / "landing"
    landing.mkdir()
    claims = {}
    records = []
    for i in range(requests):
        record = scenario_record("plain-list", "text", request_id=f"r{i}")
        claims[f"r{i}"] = needle(rnd)
        for j, citation in enumerate(record["citations"]):
            citation["claim"] = f"{claims[f'r{i}']} {j} " + " ".join([needle(rnd) for _ in range(claim_repeat)])
        records.append(record)
    write_jsonl(landing / "a.jsonl", records)
    path = tmp_path / "w.duckdb"
    with connect(path) as con:
        ensure_schema(con)
        ingest_landing(con, landing, config)
    return path, claims


def snapshot(path: Path) -> dict:
    with connect(path, read_only=True) as con:
        objects = con.sql(OBJECTS).fetchall()
        rows = {
            name: con.sql(f'select * from "{name}" order by all').fetchall()
            for kind, name, _ in objects
            if name != "pending_file_rewrite"
        }
        return {"objects": [(kind, name) for kind, name, _ in objects], "rows": rows}


def test_a_rewrite_keeps_every_row_and_leaves_no_removed_text_in_the_file(tmp_path, config):
    path, claims = warehouse_with_claims(tmp_path, config, requests=40)
    forgotten = claims["r7"]
    with connect(path) as con:
        forget_in_warehouse(con, ["r7"], by="t", reason=None, now=datetime.now(UTC))
        assert con.sql("select why from pending_file_rewrite").fetchall() == [("forget",)]
        assert con.sql(
            "select count(*) from citations where contains(claim, $n)", params={"n": forgotten}
        ).fetchall() == [(0,)]
    assert forgotten.encode() in path.read_bytes()  # DuckDB left the freed blocks as they were
    before = snapshot(path)

    done = rewrite_if_text_removed(path)
    assert done is not None and done.path == path
    assert forgotten.encode() not in path.read_bytes()
    assert claims["r8"].encode() in path.read_bytes()  # what is kept is still there, in the bytes too
    assert snapshot(path) == before  # every table and view, every row
    with connect(path, read_only=True) as con:
        assert con.sql("select count(*) from pending_file_rewrite").fetchall() == [(0,)]
        [(free,)] = con.sql("select free_blocks from pragma_database_size()").fetchall()
    assert free == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("w.duckdb")) == [
        "w.duckdb",
        "w.duckdb.open.lock",
    ]
    inode = path.stat().st_ino
    assert rewrite_if_text_removed(path) is None  # nothing removed since: the file is left alone
    assert path.stat().st_ino == inode


def test_a_rewrite_refuses_while_this_process_holds_the_file(tmp_path, config):
    path, _ = warehouse_with_claims(tmp_path, config, requests=3)
    with connect(path) as con:
        forget_in_warehouse(con, ["r1"], by="t", reason=None, now=datetime.now(UTC))
    inode = path.stat().st_ino
    with connect(path) as held:
        with pytest.raises(RuntimeError, match=r"w\.duckdb: still open in this process"):
            rewrite_if_text_removed(path)
        assert held.sql("select count(*) from pending_file_rewrite").fetchall() == [(1,)]
    assert path.stat().st_ino == inode
    assert not list(tmp_path.glob("w.duckdb.tmp-*"))


def test_a_rewrite_killed_midway_leaves_the_old_file_usable_and_marked(tmp_path, config):
    path, claims = warehouse_with_claims(tmp_path, config, requests=400, claim_repeat=60)  # a copy of seconds
    with connect(path) as con:
        forget_in_warehouse(con, ["r3"], by="t", reason=None, now=datetime.now(UTC))
    before = snapshot(path)
    code = (
        "from citegate_assets.lib.storage.file_rewrite import rewrite_if_text_removed; "
        f"rewrite_if_text_removed({str(path)!r})"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    tmp = path.with_name(f"{path.name}.tmp-{proc.pid}")
    deadline = time.monotonic() + 120
    while not tmp.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the rewrite ended before it could be killed in the middle"
    assert tmp.exists()  # killed while copying

    assert snapshot(path) == before  # the old file, whole
    with connect(path, read_only=True) as con:
        assert con.sql("select why from pending_file_rewrite").fetchall() == [("forget",)]  # still to do
    done = rewrite_if_text_removed(path)  # the next removal step finishes it
    assert done is not None
    assert not tmp.exists()  # the dead process's copy is gone
    assert claims["r3"].encode() not in path.read_bytes()
    assert snapshot(path) == before
