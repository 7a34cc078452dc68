"""Landing folders as real log shippers leave them: rotation, files still being written, odd entries,
symlinks out of the folder, compression bombs, many small files, CR-only lines, a full disk.

Every test asserts on table contents: each request id written is in `prompts` exactly once, and nothing of
a file outside the landing folder is in any table.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
import tracemalloc
from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets.lib.ingest.landing import days_in_landing
from citegate_assets.lib.ingest.stream import IngestWriteError, ingest_landing
from citegate_assets.lib.storage.warehouse import SCHEMA_VERSION, connect, ensure_schema

from .helpers import scenario_record

NOW = datetime(2026, 11, 20, tzinfo=timezone.utc)


def rec(i: int, day: str = "2026-11-02") -> dict:
    return scenario_record("plain-list", "text", request_id=f"req-{i}", logged_at=f"{day}T10:00:00Z")


def line(i: int, day: str = "2026-11-02") -> bytes:
    return (json.dumps(rec(i, day)) + "\n").encode()


def append(path: Path, *ids: int) -> None:
    with open(path, "ab") as fh:
        fh.write(b"".join(line(i) for i in ids))


def prompt_ids(con) -> list[str]:
    return [r for (r,) in con.sql("select request_id from prompts order by request_id").fetchall()]


def ids(*numbers: int) -> list[str]:
    return sorted(f"req-{i}" for i in numbers)


def rejects(con) -> list[tuple]:
    return con.sql(
        "select source_file, line_no, reason from ingest_rejects order by source_file, line_no, reason"
    ).fetchall()


def assert_balanced(con) -> None:
    """The blocking check's rule, plus: the tables hold exactly the rows the ledger counts."""
    [(read, ingested, rejected)] = con.sql(
        "select coalesce(sum(lines_read), 0), coalesce(sum(records_ingested), 0), coalesce(sum(records_rejected), 0) "
        "from ingested_files"
    ).fetchall()
    assert read == ingested + rejected
    assert con.sql("select count(*) from prompts").fetchall() == [(ingested,)]
    assert con.sql("select count(*) from ingest_rejects where line_no > 0").fetchall() == [(rejected,)]


def settled(config, seconds: float = 0.0):
    return replace(config, ingest=replace(config.ingest, settle_seconds=seconds))


# 1. rotation and folders with equal names ------------------------------------------------------------


def test_rotation_by_rename_reads_the_tail_and_the_new_file(con, landing, config):
    app = landing / "app.jsonl"
    append(app, 1, 2)
    ingest_landing(con, landing, config)
    append(app, 3)  # written after the run, before rotation
    app.rename(landing / "app.jsonl.1")
    append(app, 4, 5)  # the new file under the old name
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1, 2, 3, 4, 5)
    assert rejects(con) == []
    ingest_landing(con, landing, config)  # and again: nothing twice
    assert prompt_ids(con) == ids(1, 2, 3, 4, 5)
    assert rejects(con) == []
    assert_balanced(con)


def test_rotation_then_compression_is_the_same_file(con, landing, config):
    app = landing / "app.jsonl"
    append(app, 1, 2)
    ingest_landing(con, landing, config)
    append(app, 3)
    data = app.read_bytes()
    app.unlink()
    (landing / "app.jsonl.1.gz").write_bytes(gzip.compress(data))  # logrotate's delaycompress, then compress
    append(app, 4)
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1, 2, 3, 4)
    assert rejects(con) == []
    assert_balanced(con)


def test_copytruncate_rotation_loses_nothing(con, landing, config):
    app = landing / "app.jsonl"
    append(app, 1, 2)
    ingest_landing(con, landing, config)
    append(app, 3)
    (landing / "app.jsonl-20261102").write_bytes(app.read_bytes())  # copytruncate with a date suffix
    app.write_bytes(b"")
    append(app, 4)
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1, 2, 3, 4)
    assert rejects(con) == []


def test_two_landing_folders_with_equal_names_do_not_collide(con, tmp_path, config):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "2026-11-02.jsonl").write_bytes(line(1) + line(2))
    (second / "2026-11-02.jsonl").write_bytes(line(3) + line(4))
    ingest_landing(con, first, config)
    ingest_landing(con, second, config)
    assert prompt_ids(con) == ids(1, 2, 3, 4)
    assert rejects(con) == []
    assert con.sql("select count(distinct landing) from ingested_files").fetchall() == [(2,)]


def test_a_copy_of_a_read_file_in_another_folder_adds_nothing(con, tmp_path, config):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "x.jsonl").write_bytes(line(1) + line(2))
    (second / "y.jsonl").write_bytes(line(1) + line(2))
    ingest_landing(con, first, config)
    summary = ingest_landing(con, second, config)
    assert summary.lines_read == 0  # known by its content: not read twice
    assert prompt_ids(con) == ids(1, 2)


# 2. files still being written ------------------------------------------------------------------------


def test_half_written_last_line_is_held_back_not_rejected(con, landing, config):
    app = landing / "app.jsonl"
    whole = line(2)
    app.write_bytes(line(1) + whole[:40])  # the writer is in the middle of record 2
    summary = ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1)
    assert rejects(con) == []
    assert (summary.files_waiting, summary.bytes_held) == (1, 40)
    assert con.sql("select status, lines_read from ingested_files").fetchall() == [("waiting", 1)]
    with open(app, "ab") as fh:
        fh.write(whole[40:])
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1, 2)
    assert rejects(con) == []
    assert_balanced(con)


def test_unterminated_last_line_lands_once_the_file_settles_or_on_final(con, landing, config):
    app = landing / "app.jsonl"
    app.write_bytes(line(1) + line(2).rstrip(b"\n"))  # the writer never ends its last line
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1)
    old = time.time() - 3600
    os.utime(app, (old, old))
    ingest_landing(con, landing, settled(config, 600))  # unchanged for an hour: complete
    assert prompt_ids(con) == ids(1, 2)
    assert con.sql("select status from ingested_files").fetchall() == [("complete",)]


def test_final_counts_the_unterminated_line(con, landing, config):
    (landing / "app.jsonl").write_bytes(line(1) + line(2).rstrip(b"\n"))
    ingest_landing(con, landing, config, final=True)
    assert prompt_ids(con) == ids(1, 2)


def test_file_growing_while_it_is_read_loses_nothing(con, landing, config):
    app = landing / "app.jsonl"
    append(app, *range(1, 6))
    grown = []

    def progress(name, lines, nbytes):  # called after each committed batch: the writer appends meanwhile
        if len(grown) < 3:
            grown.append(lines)
            append(app, 100 + len(grown))

    ingest_landing(con, landing, config, batch_lines=2, progress=progress)
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1, 2, 3, 4, 5, 101, 102, 103)
    assert rejects(con) == []
    assert_balanced(con)


def test_half_copied_gzip_is_read_once_complete(con, landing, config):
    payload = gzip.compress(b"".join(line(i) for i in range(1, 41)))
    target = landing / "day.jsonl.gz"
    target.write_bytes(payload[: len(payload) // 2])  # the copy is still going
    ingest_landing(con, landing, config)
    first = prompt_ids(con)
    assert len(first) < 40
    assert rejects(con) == []  # not unreadable: unfinished
    assert con.sql("select status from ingested_files").fetchall() == [("waiting",)]
    target.write_bytes(payload)
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(*range(1, 41))
    assert rejects(con) == []
    assert_balanced(con)


def test_damaged_gzip_is_reported_once_settled_and_read_again_when_it_changes(con, landing, config):
    payload = gzip.compress(b"".join(line(i) for i in range(1, 41)))
    target = landing / "day.jsonl.gz"
    target.write_bytes(payload[: len(payload) // 2])
    ingest_landing(con, landing, settled(config))
    ingest_landing(con, landing, settled(config))
    assert [r[2] for r in rejects(con)] == ["file_unreadable"]
    target.write_bytes(payload)  # a good copy arrives
    ingest_landing(con, landing, settled(config))
    assert prompt_ids(con) == ids(*range(1, 41))


# 3. entries that are not files ---------------------------------------------------------------------


def test_entries_first_seen_as_not_a_file_never_block_later_runs(con, landing, config):
    (landing / "a.jsonl").symlink_to(landing / "later.jsonl")  # dangling, inside the folder
    (landing / "b.jsonl").mkdir()
    os.mkfifo(landing / "c.jsonl")
    append(landing / "z.jsonl", 1)
    ingest_landing(con, landing, config)
    ingest_landing(con, landing, config)  # used to crash with a TypeError, for good
    assert sorted(rejects(con)) == [
        ("a.jsonl", 0, "not_a_file"),
        ("b.jsonl", 0, "not_a_file"),
        ("c.jsonl", 0, "not_a_file"),
    ]
    # each is looked at again: once they hold records, the records land
    append(landing / "later.jsonl", 2)
    (landing / "b.jsonl").rmdir()
    append(landing / "b.jsonl", 3)
    (landing / "c.jsonl").unlink()
    append(landing / "c.jsonl", 4)
    append(landing / "z.jsonl", 5)
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1, 2, 3, 4, 5)
    assert con.sql("select count(*) from ingested_files where status = 'skipped'").fetchall() == [(0,)]
    assert_balanced(con)


# 4. symlinks out of the folder ---------------------------------------------------------------------


def all_text(con) -> str:
    """Every string value of every table, joined: to prove something is in no table."""
    parts = []
    for (table,) in con.sql(
        "select table_name from duckdb_tables() where database_name = current_database()"
    ).fetchall():
        cols = [
            c
            for c, t in con.sql(
                f"select column_name, data_type from information_schema.columns where table_name = '{table}'"
            ).fetchall()
            if t == "VARCHAR"
        ]
        for col in cols:
            parts += [v for (v,) in con.sql(f'select "{col}" from "{table}" where "{col}" is not null').fetchall()]
    return "\n".join(parts)


def test_symlinks_out_of_the_landing_folder_are_never_read(con, landing, tmp_path, config, monkeypatch):
    monkeypatch.setenv("CITEGATE_JUDGE_API_KEY", "sk-secret-never-stored-0451")
    outside = tmp_path / "private.jsonl"
    outside.write_bytes(line(99) + b"secret-line-never-stored\n")
    (landing / "env.jsonl").symlink_to("/proc/self/environ")
    (landing / "passwd.jsonl").symlink_to("/etc/passwd")
    (landing / "private.jsonl").symlink_to(outside)
    append(landing / "a.jsonl", 1)
    ingest_landing(con, landing, config, final=True)
    assert prompt_ids(con) == ids(1)
    assert sorted(rejects(con)) == [
        ("env.jsonl", 0, "symlink_outside_landing"),
        ("passwd.jsonl", 0, "symlink_outside_landing"),
        ("private.jsonl", 0, "symlink_outside_landing"),
    ]
    text = all_text(con)
    for needle in ("sk-secret-never-stored-0451", "root:x:0:0", "secret-line-never-stored", "req-99"):
        assert needle not in text
    assert con.sql("select count(*) from ingest_rejects where raw_line is not null").fetchall() == [(0,)]


def test_a_symlink_inside_the_folder_reads_its_file_once(con, landing, config):
    hidden = landing / ".current.jsonl"  # dot files are not read by name...
    append(hidden, 1, 2)
    (landing / "app.jsonl").symlink_to(hidden)  # ...but a link to one, inside the folder, is
    (landing / "app-again.jsonl").symlink_to(hidden)
    ingest_landing(con, landing, config)
    assert prompt_ids(con) == ids(1, 2)
    assert rejects(con) == []


# 5. bounded memory on any input --------------------------------------------------------------------


def _gzip_bomb(path: Path, line_bytes: int) -> None:
    with gzip.open(path, "wb", compresslevel=9) as fh:
        fh.write(b'{"request_id": "bomb", "prompt": "')
        block = b"a" * (1 << 20)
        for _ in range(line_bytes >> 20):
            fh.write(block)
        fh.write(b'"}\n')
        fh.write(line(1))


def test_gzip_bomb_line_is_rejected_while_streaming_with_bounded_memory(con, landing, config):
    _gzip_bomb(landing / "bomb.jsonl.gz", 256 << 20)  # 256 MiB in one line, ~250 KB compressed
    assert (landing / "bomb.jsonl.gz").stat().st_size < 1 << 20
    small = replace(config, ingest=replace(config.ingest, max_line_bytes=1 << 20))
    tracemalloc.start()
    try:
        ingest_landing(con, landing, small)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"peak {peak / 2**20:.0f} MiB"
    [(line_no, reason, raw)] = con.sql("select line_no, reason, raw_line from ingest_rejects").fetchall()
    assert (
        (line_no, reason) == (1, "line_too_long") and raw.startswith('{"request_id": "bomb"') and len(raw) <= 64 * 1024
    )
    assert prompt_ids(con) == ids(1)  # the line after the bomb still lands


def test_decompression_past_the_bound_is_a_reject_row(con, landing, config):
    _gzip_bomb(landing / "bomb.jsonl.gz", 64 << 20)
    append(landing / "a.jsonl", 2)
    bounded = replace(config, ingest=replace(config.ingest, max_decompressed_bytes=8 << 20))
    ingest_landing(con, landing, bounded)
    ingest_landing(con, landing, bounded)
    assert rejects(con) == [("bomb.jsonl.gz", 0, "decompressed_too_large")]
    assert prompt_ids(con) == ids(2)


# 6. the days to run come from valid records --------------------------------------------------------


def test_a_rejected_line_never_widens_the_days_to_run(landing):
    bad = rec(9, "2020-01-01")
    del bad["surface"]  # rejected at ingest: missing_field
    (landing / "a.jsonl").write_bytes(line(1, "2026-11-02") + (json.dumps(bad) + "\n").encode() + line(2, "2026-11-03"))
    (landing / "b.jsonl").write_bytes(b'{"logged_at": "2021-05-05T00:00:00Z"}\n' + line(3, "2026-11-03"))
    assert days_in_landing(landing, now=NOW) == {date(2026, 11, 2), date(2026, 11, 3)}


def test_plan_takes_days_from_valid_records_only(landing, tmp_path):
    from citegate_assets.pipeline import plan_days

    bad = json.dumps({**rec(9, "2020-01-01"), "retrieved": "not a list"})
    (landing / "a.jsonl").write_bytes(line(1, "2026-11-02") + bad.encode() + b"\n" + line(2, "2026-11-04"))
    plan = plan_days(landing, tmp_path / "none.duckdb", None, None, today=date(2026, 11, 20))
    assert (plan.start, plan.end) == (date(2026, 11, 2), date(2026, 11, 4))


# 7. many small files -------------------------------------------------------------------------------


def test_many_small_files_land_in_few_transactions(con, landing, config):
    n = 1500
    for i in range(n):
        (landing / f"f{i:05d}.jsonl").write_bytes(line(i))
    commits = []
    summary = ingest_landing(con, landing, config, progress=lambda *a: commits.append(a))
    assert summary.records_ingested == n
    assert len(prompt_ids(con)) == n
    assert con.sql("select count(*) from ingested_files where status = 'complete'").fetchall() == [(n,)]
    assert len(commits) <= n // 2000 + 2  # ledger rows go with the batches, not one transaction per file
    again = ingest_landing(con, landing, config)
    assert again.lines_read == 0


# 9. CR-only lines, a full disk ---------------------------------------------------------------------


def test_cr_only_file_is_read_as_lines(con, landing, config):
    body = b"".join(line(i).rstrip(b"\n") + b"\r" for i in (1, 2, 3))
    (landing / "mac.jsonl").write_bytes(body)
    ingest_landing(con, landing, config, final=True)
    assert prompt_ids(con) == ids(1, 2, 3)
    assert rejects(con) == []


def test_disk_full_names_the_file_and_a_repeat_loses_nothing(tmp_path, landing, config):
    mount = tmp_path / "small"
    mount.mkdir()
    if (
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        for i in range(1, 61):
            append(landing / "a.jsonl", i)
        padding = "x" * 60_000
        with open(landing / "a.jsonl", "ab") as fh:
            for i in range(61, 121):
                fh.write((json.dumps({**rec(i), "answer": padding}) + "\n").encode())
        with connect(mount / "wh.duckdb") as c:
            ensure_schema(c)
            with pytest.raises(IngestWriteError) as err:
                ingest_landing(c, landing, config, batch_lines=10)
        message = str(err.value)
        assert "disk is full" in message and str(mount / "wh.duckdb") in message and "run again" in message
        assert "a.jsonl" in message
        # free space: move the warehouse to a roomy disk and repeat
        roomy = tmp_path / "wh.duckdb"
        with connect(mount / "wh.duckdb") as c:
            c.execute(f"attach '{roomy}' as roomy")
            c.execute("copy from database wh to roomy")
        with connect(roomy) as c:
            ensure_schema(c)
            ingest_landing(c, landing, config)
            assert prompt_ids(c) == ids(*range(1, 121))
            assert_balanced(c)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_the_ledger_of_a_release_before_file_identities_is_adopted(tmp_path, config):
    """A warehouse written by the release at 8747f80 (ledger keyed by name) is upgraded; its files are not read
    twice."""
    fixtures = Path(__file__).parent / "fixtures"
    db = tmp_path / "old.duckdb"
    db.write_bytes(gzip.decompress((fixtures / "warehouse-8747f80.duckdb.gz").read_bytes()))
    landing = tmp_path / "landing"
    landing.mkdir()
    for f in (fixtures / "release-landing").iterdir():
        (landing / f.name).write_bytes(f.read_bytes())
    with connect(db) as c:
        before = c.sql("select count(*) from prompts").fetchall()[0][0]
        ensure_schema(c)
        assert c.sql("select max(version) from schema_version").fetchall() == [(SCHEMA_VERSION,)]
        summary = ingest_landing(c, landing, config, final=True)
        assert summary.records_ingested == 0 and summary.records_rejected == 0
        assert c.sql("select count(*) from prompts").fetchall() == [(before,)]
        assert c.sql("select count(*) from ingested_files where file_id like 'legacy:%'").fetchall() == [(0,)]
        append(landing / "2026-11-03.jsonl", 500)
        ingest_landing(c, landing, config)
        assert c.sql("select count(*) from prompts").fetchall() == [(before + 1,)]
        assert_balanced(c)
