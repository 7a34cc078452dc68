"""A day's ingest split across shard processes (lib/ingest/shards.py): every table equal, row for row, to a one-worker
ingest of the same files (duplicates across shards and the bad-input corpus included); shards appending to the
staging tables at once lose and duplicate nothing (in a folder and on the local S3 server); a shard killed before its
marker leaves nothing readable, and the next run ingests its files once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from benchmarks.stages import INGEST_TABLES_CLOCK_FREE
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.core.processes import spawned_pool
from citegate_assets.lib.ingest import shards
from citegate_assets.lib.ingest.landing import landing_entries, landing_root
from citegate_assets.lib.ingest.shard_collect import collect
from citegate_assets.lib.ingest.shard_staging import SHARD_RUN, Staging
from citegate_assets.lib.ingest.shards import ShardTask, assign, ingest_sharded
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage.lake_store import open_store
from citegate_assets.lib.storage.warehouse import connect, ensure_schema

from .helpers import scenario_record
from .s3_server import S3Server, s3_server
from .test_bad_input_corpus import BUG_LINE_CASES, LINE_CASES, _all_in_one, encode, good

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
FIXTURES = Path(__file__).parent / "fixtures" / "adapters"
TRACE_FIXTURES = (
    "anthropic/exchanges.jsonl",
    "langfuse/observations_page.json",
    "openinference/phoenix_spans.jsonl",
    "otlp/otlp_split_details_logs.jsonl",
    "otlp/otlp_split_details_spans.jsonl",
    "otlp/otlp_events.jsonl",
)
CONFIG = {"ingest": {"settle_seconds": 3600}}
TABLES = {
    "prompts": "*",
    "prompt_rows": "* exclude (text_file)",
    "prompt_sections": "*",
    "retrievals": "*",
    "citations": "*",
    "answer_rejects": "*",
    "ingest_rejects": "*",
    "prompt_conflicts": "*",
    "request_source_lines": "*",
    "ingested_files": "*",
}


def _record(rid: str, day: str = "2026-11-02", **changes) -> dict:
    record = scenario_record("plain-list", "text", request_id=rid, logged_at=f"{day}T10:00:00Z")
    record.update(changes)
    return record


def _line(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


def _landing(root: Path) -> Path:
    """Generated days (malformed lines, a .gz day), the bad-input corpus, and twelve small files that share request
    ids (the same prompt, and another prompt) so that copies land on both shards."""
    landing = root / "landing"
    generate_logs(landing, days=3, requests_per_day=30, seed=7, malformed=True, start_date="2026-11-02")
    lines, _ = _all_in_one(LINE_CASES + BUG_LINE_CASES)
    for fixture in TRACE_FIXTURES:  # trace formats, one JSON document, and OTel logs paired with spans in other files
        shutil.copy(FIXTURES / fixture, landing / Path(fixture).name)
        os.utime(landing / Path(fixture).name, (0, 0))  # settled: a trace file is converted once it has settled
    (landing / "corpus.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    for i in range(12):
        copies = [  # a first line of its own: a file's identity is its first line
            _line(_record(f"own-{i}")),
            _line(_record("shared-same")),
            _line(_record("shared-other", prompt=f"prompt number {i}")),
            _line(_record(f"own-{i}")),
            encode(good(1)).decode(),  # the corpus file's first record: its copy there comes later
        ]
        (landing / f"copies-{i:02d}.jsonl").write_text("\n".join(copies) + "\n", encoding="utf-8")
    return landing


def _rows(path: Path) -> dict[str, list[tuple]]:
    with connect(path, read_only=True) as con:
        return {t: sorted(con.sql(f"select {cols} from {t}").fetchall(), key=repr) for t, cols in TABLES.items()}


def _one(warehouse: Path, landing: Path) -> None:
    with connect(warehouse) as con:
        ensure_schema(con)
        ingest_landing(con, landing, parse_config(CONFIG, None), now=NOW)


def _sharded(warehouse: Path, landing: Path, staging: str, n: int = 2, batch_lines: int | None = None) -> None:
    with connect(warehouse) as con:
        ensure_schema(con)
        ingest_sharded(
            con, landing, parse_config(CONFIG, None), shards=n, staging=staging, now=NOW, batch_lines=batch_lines
        )


def _assert_same(one: Path, two: Path) -> None:
    first, second = _rows(one), _rows(two)
    for table in TABLES:
        assert first[table] == second[table], table


def test_two_shards_write_the_same_rows_as_one(tmp_path):
    landing = _landing(tmp_path)
    plan = assign(landing_root(landing), list(landing_entries(landing_root(landing))), 2, False, 3600)
    copies = [{n for n in names if n.startswith("copies-")} for names in plan]
    assert all(copies), plan  # request ids shared across files of both shards
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    _one(one, landing)
    _sharded(two, landing, str(tmp_path / "staging"), batch_lines=7)  # many batches, several staging flushes
    _assert_same(one, two)
    with connect(two, read_only=True) as con:
        reasons = dict(con.sql("select reason, count(*) from ingest_rejects group by reason").fetchall())
        assert reasons["duplicate_request_id"] >= 12 + 11 + 12
        assert reasons["request_id_conflict"] >= 11
        [(detail,)] = con.sql(
            "select detail from ingest_rejects where request_id = 'shared-same' and source_file = 'copies-11.jsonl'"
        ).fetchall()
        assert "from copies-00.jsonl:2 " in detail  # the first file in landing order, whichever shard read it
        assert len({r[0] for r in _rows(two)["prompts"]}) == len(_rows(two)["prompts"])
        converted = {f for (f,) in con.sql("select distinct source_file from prompts").fetchall()}
        pair = {"otlp_split_details_logs.jsonl", "otlp_split_details_spans.jsonl"}  # the calls named by one of them
        assert {Path(f).name for f in TRACE_FIXTURES} - pair <= converted and pair & converted, converted

    # a second day of lines appended to files of both shards, and the same files again: read on, nothing twice
    for i in (0, 11):
        with (landing / f"copies-{i:02d}.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(_line(_record("shared-same")) + "\n" + _line(_record(f"later-{i}", day="2026-11-03")) + "\n")
    _one(one, landing)
    _sharded(two, landing, str(tmp_path / "staging"))
    _assert_same(one, two)
    before = _rows(two)
    _sharded(two, landing, str(tmp_path / "staging"))
    assert _rows(two) == before


def _append_rows(staging: str, shard_run: str, rows: int, commits: int) -> None:
    stage = Staging(open_store(staging))
    for c in range(commits):
        stage.append(
            "batch_source_lines",
            pl.DataFrame(
                {
                    "request_id": [f"{shard_run}-{c}-{i}" for i in range(rows)],
                    "source_file": [shard_run] * rows,
                    "line_no": list(range(rows)),
                }
            ),
            shard_run,
        )


def _concurrent_appends(staging: str) -> None:
    with spawned_pool(2) as pool:
        for f in [pool.submit(_append_rows, staging, run, 50, 6) for run in ("a", "b")]:
            f.result()
    stage = Staging(open_store(staging))
    got = stage.read("batch_source_lines", ["a", "b"])
    assert got is not None
    assert got.height == 2 * 6 * 50
    assert got["request_id"].n_unique() == 2 * 6 * 50
    assert sorted(got[SHARD_RUN].unique().to_list()) == ["a", "b"]


def test_two_shards_appending_at_once_lose_and_duplicate_nothing(tmp_path):
    _concurrent_appends(str(tmp_path / "staging"))


@pytest.fixture(scope="module")
def s3():
    with s3_server() as server:
        yield server


def test_two_shards_appending_at_once_on_s3_lose_and_duplicate_nothing(s3: S3Server, tmp_path, monkeypatch):
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    _concurrent_appends(f"s3://{s3.bucket}/{tmp_path.name}/_staging")


def test_sharded_ingest_on_s3_staging_equals_one(s3: S3Server, tmp_path, monkeypatch):
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    landing = tmp_path / "landing"
    generate_logs(landing, days=2, requests_per_day=15, seed=3, malformed=True, start_date="2026-11-02")
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    _one(one, landing)
    _sharded(two, landing, f"s3://{s3.bucket}/{tmp_path.name}/_staging")
    _assert_same(one, two)
    assert s3.keys(f"{tmp_path.name}/_staging/") == []  # swept: no table, no text file left in the bucket


KILLED_SHARD = """
import os, pickle, signal, sys
from citegate_assets.lib.ingest import shards
from citegate_assets.lib.ingest.shard_collect import collect
task = pickle.load(open(sys.argv[1], "rb"))
shards.commit_marker = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
shards.run_shard(task)
"""


def test_a_shard_killed_before_its_marker_leaves_nothing_readable(tmp_path):
    import pickle

    landing = _landing(tmp_path)
    staging = str(tmp_path / "staging")
    warehouse = tmp_path / "two.duckdb"
    root = landing_root(landing)
    names = tuple(e.name for e in landing_entries(root))
    task = ShardTask("killed-0", 0, 1, str(root), names, staging, parse_config(CONFIG, None), NOW, False, (), None, 7)
    (tmp_path / "task.pickle").write_bytes(pickle.dumps(task))
    env = {**os.environ, "PYTHONPATH": str(Path(shards.__file__).parents[2])}
    done = subprocess.run(
        [sys.executable, "-c", KILLED_SHARD, str(tmp_path / "task.pickle")], env=env, capture_output=True, timeout=300
    )
    assert done.returncode == -9, done.stderr.decode()[-2000:]
    stage = Staging(open_store(staging))
    staged = stage.read("batch_prompts", ["killed-0"])
    assert staged is not None and staged.height > 0  # its rows were committed to the staging tables ...
    assert stage.markers().is_empty()  # ... but no marker
    with connect(warehouse) as con:
        ensure_schema(con)
        collect(con, stage, ["killed-0"], {}, NOW)  # its rows are never read
        for table in TABLES:
            [(n,)] = con.sql(f"select count(*) from {table}").fetchall()
            assert n == 0, table
    # the next run sweeps them and ingests the files once
    _sharded(warehouse, landing, staging)
    one = tmp_path / "one.duckdb"
    _one(one, landing)
    _assert_same(one, warehouse)
    gone = stage.read("batch_prompts", ["killed-0"])
    assert gone is None or gone.is_empty()
    left = [p for p in Path(staging).rglob("*") if p.is_file()]
    assert left == []  # the killed shard's data and text files swept


CLOCK_FREE = {**INGEST_TABLES_CLOCK_FREE, "provenance_results": "* exclude (checked_at)"}


def test_citegate_run_with_two_shards_equals_one(tmp_path, dagster_home, monkeypatch):
    """`citegate run --shards 2` (run_range): the ingest step splits the files, the gate reads the rows whatever
    shard wrote them, and the lake's staging holds no row and no text file afterwards."""
    from datetime import date

    from citegate_assets.pipeline import RunPlan, run_range

    landing = tmp_path / "landing"
    generate_logs(landing, days=2, requests_per_day=12, seed=5, malformed=True, start_date="2026-11-02")
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    plan = RunPlan(date(2026, 11, 2), date(2026, 11, 3))
    found = {}
    for shards_given in (None, 2):
        warehouse = tmp_path / f"w{shards_given}.duckdb"
        result = run_range(plan, landing=landing, warehouse=warehouse, config_file=None, shards=shards_given)
        assert result.success
        with connect(warehouse, read_only=True) as con:
            found[shards_given] = {
                t: sorted(con.sql(f"select {cols} from {t}").fetchall(), key=repr) for t, cols in CLOCK_FREE.items()
            }
    for table in CLOCK_FREE:
        assert found[None][table] == found[2][table], table
    assert len(found[2]["provenance_results"]) > 0
    staging = tmp_path / "w2.lake" / "_staging"
    assert staging.is_dir()  # the sharded run staged there ...
    left = [p for p in staging.rglob("*") if p.is_file()]
    assert left == []  # ... and swept it: no data file, no text file
    assert not (tmp_path / "wNone.lake" / "_staging").exists()


def test_a_copy_whose_frames_fail_is_refused_across_shards_as_one_ingest_refuses_it(tmp_path, monkeypatch):
    """A first copy whose frames cannot be built (unprocessable_record) still claims its request id in one ingest:
    a later copy in the other shard is refused naming it; and refused by an earlier copy in the other shard, its
    reject is the refusal, with its counts unchanged. The shards run here in this process, so the failure can be
    planted."""
    from citegate_assets.lib.ingest import batch

    build = batch.build_frames

    def failing(items, config, origin, now, decoded):
        if any(origin[key][0].startswith("poison-") and rec.request_id.startswith("shared-") for key, rec in items):
            raise ValueError("planted failure")
        return build(items, config, origin, now, decoded)

    monkeypatch.setattr(batch, "build_frames", failing)
    landing = tmp_path / "landing"
    landing.mkdir()
    files = {  # (the shard it is staged by, its lines); landing order is by name
        "a-valid-first.jsonl": (0, ["own-a", "shared-x"]),
        "poison-first.jsonl": (1, ["own-b", "shared-y"]),
        "poison-later.jsonl": (1, ["own-p", "shared-x"]),
        "y-valid-later.jsonl": (0, ["own-y", "shared-y"]),
    }
    for name, (_shard, ids) in files.items():
        (landing / name).write_text("".join(_line(_record(rid)) + "\n" for rid in ids), encoding="utf-8")
    root = landing_root(landing)
    names = [e.name for e in landing_entries(root)]
    config = parse_config(CONFIG, None)
    staging = str(tmp_path / "staging")
    for shard in (0, 1):
        mine = tuple(n for n in names if files[n][0] == shard)
        shards.run_shard(ShardTask(f"run-{shard}", shard, 2, str(root), mine, staging, config, NOW, False, ()))
    two = tmp_path / "two.duckdb"
    with connect(two) as con:
        ensure_schema(con)
        order = {name: i for i, name in enumerate(names)}
        collect(con, Staging(open_store(staging)), ["run-0", "run-1"], order, NOW, landing=root)
    one = tmp_path / "one.duckdb"
    _one(one, landing)
    _assert_same(one, two)
    with connect(two, read_only=True) as con:
        rows = con.sql("select source_file, reason from ingest_rejects order by source_file").fetchall()
    assert rows == [
        ("poison-first.jsonl", "unprocessable_record"),
        ("poison-later.jsonl", "duplicate_request_id"),
        ("y-valid-later.jsonl", "duplicate_request_id"),
    ]
