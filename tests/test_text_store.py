"""The prompt text store (schema 12, lib/storage/text_store.py): prompt text in Parquet files beside the warehouse, read
through the `prompts` view; what ingest, a failed write, retention, forget and a moved warehouse leave on disk."""

from __future__ import annotations

import shutil
from datetime import date, datetime, timezone

import duckdb
import polars as pl
import pytest

from citegate_assets.lib.ingest import writer as ingest_writer
from citegate_assets.lib.ingest.stream import IngestWriteError, ingest_landing
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.retention.drop_text import apply_retention
from citegate_assets.lib.retention.forget import forget_in_warehouse
from citegate_assets.lib.storage.text_store import EMPTY_FILE, streamed_text, text_dir_of
from citegate_assets.lib.storage.warehouse import connect, ensure_schema, query

NOW = datetime(2026, 11, 20, 3, 0, tzinfo=timezone.utc)
# every column of the prompts view but the ingest time
PROMPTS = "select * exclude (ingested_at) from prompts order by request_id"


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    landing = tmp_path_factory.mktemp("text-store") / "landing"
    generate_logs(landing, days=3, requests_per_day=60, seed=12, malformed=False, start_date="2026-11-02")
    return landing


def ingested(path, landing, config):
    with connect(path) as con:
        ensure_schema(con)
        ingest_landing(con, landing, config, final=True, now=NOW)
    return path


def stored_text(folder) -> pl.DataFrame:
    """Every row of every file in the text folder, whether or not a prompt row names its file."""
    return pl.concat([pl.read_parquet(p) for p in sorted(folder.rglob("*.parquet"))])


def test_ingest_writes_the_prompt_text_to_day_files_and_the_view_reads_what_inline_storage_would(
    tmp_path, logs, config
):
    path = ingested(tmp_path / "w.duckdb", logs, config)
    folder = tmp_path / "w.text"
    assert text_dir_of(str(path)) == folder
    with duckdb.connect(":memory:") as inline:  # no text folder: the text stays in prompt_rows
        ensure_schema(inline)
        ingest_landing(inline, logs, config, final=True, now=NOW)
        expected = inline.sql(PROMPTS).fetchall()
        assert inline.sql("select count(*) from prompt_rows where text_file is not null").fetchall() == [(0,)]
    with connect(path, read_only=True) as con:
        assert con.sql(PROMPTS).fetchall() == expected
        assert len(expected) > 150
        # the table holds no prompt text; every row names a file of its own day
        assert con.sql(
            "select count(*), count(prompt_raw), count(prompt_normalized), "
            "count(*) filter (where text_file like 'day=' || day::varchar || '/%.parquet') from prompt_rows"
        ).fetchall() == [(len(expected), 0, 0, len(expected))]
        named = {f for (f,) in con.sql("select distinct text_file from prompt_rows").fetchall()}
    on_disk = {str(p.relative_to(folder)) for p in folder.glob("day=*/*.parquet")} - {EMPTY_FILE}
    assert on_disk == named
    assert {p.split("/")[0] for p in on_disk} == {"day=2026-11-02", "day=2026-11-03", "day=2026-11-04"}
    # prompts hold user data: the owner only, like the warehouse file and the lake
    assert {oct(p.stat().st_mode & 0o777) for p in folder.rglob("*")} | {oct(folder.stat().st_mode & 0o777)} == {
        "0o600",
        "0o700",
    }
    assert {oct(p.stat().st_mode & 0o777) for p in folder.rglob("*.parquet")} == {"0o600"}


def test_a_failed_write_leaves_no_text_file_and_a_killed_ingests_file_is_swept(tmp_path, logs, config, monkeypatch):
    path = tmp_path / "w.duckdb"
    folder = tmp_path / "w.text"

    def failing(cursor, relations, ledger, memory, limit):
        raise duckdb.IOException("disk gone")

    monkeypatch.setattr(ingest_writer, "_write_batch_within", failing)
    with connect(path) as con:
        ensure_schema(con)
        with pytest.raises(IngestWriteError):
            ingest_landing(con, logs, config, final=True, now=NOW)
        assert con.sql("select count(*) from prompt_rows").fetchall() == [(0,)]
    # the batch's file was removed with its transaction
    assert [str(p.relative_to(folder)) for p in folder.glob("day=*/*.parquet")] == [EMPTY_FILE]
    monkeypatch.undo()
    # a killed ingest leaves a file no row names: never read, and removed by the next ingest
    orphan = folder / "day=2026-11-02" / "killed.parquet"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(folder / EMPTY_FILE, orphan)
    (folder / "day=2026-11-02" / ".half-written.parquet.tmp").write_bytes(b"PAR1")
    ingested(path, logs, config)
    assert not orphan.exists()
    assert not (folder / "day=2026-11-02" / ".half-written.parquet.tmp").exists()
    with connect(path, read_only=True) as con:
        assert con.sql("select count(*), count(prompt_raw) from prompts").fetchall() == [(180, 180)]


def test_retention_deletes_the_dropped_days_files_and_keeps_the_others(tmp_path, logs, config):
    path = ingested(tmp_path / "w.duckdb", logs, config)
    folder = tmp_path / "w.text"
    with connect(path) as con:
        ensure_schema(con)
        [(secret,)] = con.sql("select prompt_raw from prompts where day = date '2026-11-02' limit 1").fetchall()
        kept = con.sql("select request_id, prompt_raw from prompts where day > date '2026-11-02' order by 1").fetchall()
        dropped = apply_retention(con, 17, NOW)  # the cutoff is 2026-11-03: only the first day goes
        assert list(dropped) == [date(2026, 11, 2)]
        assert dropped[date(2026, 11, 2)]["prompts"] == 60
        assert con.sql(
            "select day, count(prompt_raw), count(prompt_normalized), count(*) from prompts group by day order by day"
        ).fetchall() == [
            (date(2026, 11, 2), 0, 0, 60),
            (date(2026, 11, 3), 60, 60, 60),
            (date(2026, 11, 4), 60, 60, 60),
        ]
        assert (
            con.sql("select request_id, prompt_raw from prompts where day > date '2026-11-02' order by 1").fetchall()
            == kept
        )
        # a text-less row is not a lost file: the sha256 check passes
        with streamed_text(con):
            assert query(con, "ingest/check_prompt_hashes", {"day": date(2026, 11, 2)}).fetchall() == []
    assert not list(folder.glob("day=2026-11-02/*"))
    assert secret not in stored_text(folder)["prompt_raw"].to_list()


def test_forget_rewrites_the_file_without_the_request_and_its_neighbours_keep_their_text(tmp_path, logs, config):
    path = ingested(tmp_path / "w.duckdb", logs, config)
    folder = tmp_path / "w.text"
    with connect(path) as con:
        ensure_schema(con)
        [(rid, old_file, secret)] = con.sql(
            "select r.request_id, r.text_file, p.prompt_raw from prompt_rows r join prompts p using (request_id) "
            "order by r.request_id limit 1"
        ).fetchall()
        neighbours = con.sql(
            "select p.request_id, p.prompt_raw, p.prompt_normalized from prompts p join prompt_rows r using "
            "(request_id) where r.text_file = $f and r.request_id <> $r order by 1",
            params={"f": old_file, "r": rid},
        ).fetchall()
        assert neighbours and secret in stored_text(folder)["prompt_raw"].to_list()
        result = forget_in_warehouse(con, [rid], by="test", reason=None, now=NOW)
        assert result.forgotten[rid]["prompts"] == 1
        assert con.sql(
            "select prompt_raw, prompt_normalized from prompts where request_id = $r", params={"r": rid}
        ).fetchall() == [(None, None)]
        [(new_file,)] = con.sql(
            "select distinct text_file from prompt_rows where request_id in (select unnest($ids::varchar[]))",
            params={"ids": [n[0] for n in neighbours]},
        ).fetchall()
        assert new_file != old_file
        assert (
            con.sql(
                "select request_id, prompt_raw, prompt_normalized from prompts where request_id in "
                "(select unnest($ids::varchar[])) order by 1",
                params={"ids": [n[0] for n in neighbours]},
            ).fetchall()
            == neighbours
        )
    assert not (folder / old_file).exists()
    # the forgotten request's id and text are in no file of the text folder
    left = stored_text(folder)
    assert rid not in left["request_id"].to_list() and secret not in left["prompt_raw"].to_list()


def test_a_lost_text_file_fails_the_sha256_check_instead_of_reading_as_dropped_text(tmp_path, logs, config):
    path = ingested(tmp_path / "w.duckdb", logs, config)
    with connect(path) as con:
        [(name,)] = con.sql(
            "select text_file from prompt_rows where day = date '2026-11-03' order by request_id limit 1"
        ).fetchall()
        lost = {
            r
            for (r,) in con.sql(
                "select request_id from prompt_rows where text_file = $f", params={"f": name}
            ).fetchall()
        }
    (tmp_path / "w.text" / name).unlink()
    with connect(path, read_only=True) as con:
        with streamed_text(con):
            flagged = query(con, "ingest/check_prompt_hashes", {"day": date(2026, 11, 3)}).fetchall()
    assert {r[0] for r in flagged} == lost and lost


def test_a_warehouse_moved_with_its_text_folder_reads_its_text_from_the_new_place(tmp_path, logs, config):
    path = ingested(tmp_path / "a" / "w.duckdb", logs, config)
    with connect(path, read_only=True) as con:
        expected = con.sql(PROMPTS).fetchall()
    moved = tmp_path / "b" / "w.duckdb"
    moved.parent.mkdir()
    shutil.move(path, moved)
    shutil.move(tmp_path / "a" / "w.text", tmp_path / "b" / "w.text")
    with connect(moved) as con:
        ensure_schema(con)  # re-points the view
        assert con.sql(PROMPTS).fetchall() == expected
        [(sql,)] = con.sql("select sql from duckdb_views() where view_name = 'prompts'").fetchall()
        assert str(tmp_path / "b" / "w.text") in sql and str(tmp_path / "a") not in sql


def test_a_query_bounded_by_days_opens_only_those_days_text_files(tmp_path, logs, config):
    """The view joins on the day folder too: readers bounded by constant days (the gates' windows, the sha256
    check's day) never open another day's files, so their cost does not grow with history."""
    path = ingested(tmp_path / "w.duckdb", logs, config)
    with connect(path, read_only=True) as con:
        expected = con.sql("select request_id, prompt_raw from prompts where day = date '2026-11-03' order by 1")
        expected = expected.fetchall()
    for f in (tmp_path / "w.text" / "day=2026-11-02").glob("*.parquet"):
        f.write_bytes(b"not parquet")  # any read of day 1's text now fails loudly
    with connect(path, read_only=True) as con:
        bounded = "select request_id, prompt_raw from prompts where day >= $start and day < $end order by 1"
        params = {"start": date(2026, 11, 3), "end": date(2026, 11, 4)}
        assert con.execute(bounded, params).fetchall() == expected
        with streamed_text(con):
            assert query(con, "ingest/check_prompt_hashes", {"day": date(2026, 11, 3)}).fetchall() == []
        with pytest.raises(duckdb.Error):
            con.sql("select count(prompt_raw) from prompts").fetchall()


def test_a_refused_copys_text_is_in_no_file(tmp_path, config):
    """The parse step writes each batch's text file (lib/storage/text_files.py); a copy refused because its request id
    was
    ingested before (a conflict, or a re-sent line of a forgotten request) is taken out of the file before the
    batch commits, so forget's promise holds: the text is in no file."""
    from tests.helpers import write_jsonl
    from tests.test_ingest import good

    landing = tmp_path / "landing"
    landing.mkdir()
    first = [good(i) for i in range(1, 6)]
    write_jsonl(landing / "a.jsonl", first)
    path = ingested(tmp_path / "w.duckdb", landing, config)
    folder = tmp_path / "w.text"
    with connect(path) as con:
        ensure_schema(con)
        forget_in_warehouse(con, ["req-2"], by="test", reason="user asked", now=NOW)
    conflicting = {**good(1), "prompt": good(1)["prompt"] + " SECRET-EDIT"}
    resent = {**good(2), "prompt": good(2)["prompt"] + " SECRET-RESENT"}
    write_jsonl(landing / "b.jsonl", [conflicting, good(7), resent, good(8)])
    ingested(path, landing, config)
    texts = stored_text(folder)["prompt_raw"].to_list()
    assert not any("SECRET" in t for t in texts)
    with connect(path, read_only=True) as con:
        assert con.sql("select count(*), count(prompt_raw) from prompts").fetchall() == [(7, 6)]  # req-2 forgotten
        named = {
            f for (f,) in con.sql("select distinct text_file from prompt_rows where text_file is not null").fetchall()
        }
        assert con.sql("select reason from ingest_rejects order by line_no").fetchall() == [
            ("request_id_conflict",),
            ("request_id_conflict",),
        ]
    assert {str(p.relative_to(folder)) for p in folder.glob("day=*/*.parquet")} - {EMPTY_FILE} == named


def _plan(con, sql: str) -> dict:
    import json

    [(_, plan)] = con.sql(f"explain (format json) {sql}").fetchall()
    return json.loads(plan)[0]


def _nodes(node: dict):
    yield node
    for child in node.get("children", []):
        yield from _nodes(child)


def test_streamed_text_holds_the_prompt_rows_and_streams_the_text_of_the_days_only(tmp_path, logs, config):
    """The night's readers of prompt text (the lake export, the passages, best evidence, the queue) read
    prompts_between under streamed_text: the same rows and text as the `prompts` view, with the hash table built on
    prompt_rows (no text) and the text files streamed past it, only the days asked for opened (a day 1 file made
    unreadable is never touched). The view itself, planned freely, builds on the text: what this avoids. An inline
    row (written before schema 12) reads the same, and the connection's optimizer setting is back afterwards."""
    from citegate_assets.lib.storage.text_store import streamed_text

    path = ingested(tmp_path / "w.duckdb", logs, config)
    days = "where day >= date '2026-11-03' and day < date '2026-11-05'"
    with connect(path) as con:
        expected = con.sql(f"{PROMPTS.replace(' order by', f' {days} order by')}").fetchall()
        # one row of day 2 as a schema 11 warehouse left it: its text inline, no file named
        [(inline_id,)] = con.sql("select min(request_id) from prompt_rows where day = date '2026-11-03'").fetchall()
        con.execute(
            "update prompt_rows r set prompt_raw = p.prompt_raw, prompt_normalized = p.prompt_normalized, "
            "text_file = null from prompts p where p.request_id = r.request_id and r.request_id = $id",
            {"id": inline_id},
        )
        free = _plan(con, "select * from prompts where day = date '2026-11-03'")
        free_join = next(n for n in _nodes(free) if n["name"] == "HASH_JOIN")
        assert free_join["children"][1]["name"] == "READ_PARQUET"  # the text in the hash table
    for f in (tmp_path / "w.text" / "day=2026-11-02").glob("*.parquet"):
        f.write_bytes(b"not parquet")  # any read of day 1's text now fails loudly
    with connect(path, read_only=True) as con:
        [(before,)] = con.sql("select current_setting('disabled_optimizers')").fetchall()
        between = "select * exclude (ingested_at) from prompts_between(date '2026-11-03', date '2026-11-05')"
        with streamed_text(con):
            assert con.sql(f"{between} order by request_id").fetchall() == expected
            join = next(n for n in _nodes(_plan(con, between)) if n["name"] == "HASH_JOIN")
            probe, build = join["children"]
            assert [n["name"] for n in _nodes(build)] == ["SEQ_SCAN"] and "prompt_rows" in str(build["extra_info"])
            assert [n["name"] for n in _nodes(probe)][-1] == "READ_PARQUET"
            assert "2026-11-03" in str(probe["extra_info"])  # the days bound the files opened
        assert con.sql("select current_setting('disabled_optimizers')").fetchall() == [(before,)]
        assert any(row[0] == inline_id for row in expected)


def test_prompts_between_on_the_published_copy_or_in_memory_reads_prompts(config, logs):
    """Where `prompts` holds its text itself (an in-memory warehouse here; the published copy's lake views alike),
    prompts_between is `prompts` for those days."""
    from citegate_assets.lib.storage.text_store import streamed_text

    with duckdb.connect(":memory:") as con:
        ensure_schema(con)
        ingest_landing(con, logs, config, final=True, now=NOW)
        expected = con.sql("select * from prompts where day = date '2026-11-04' order by request_id").fetchall()
        with streamed_text(con):
            got = con.sql(
                "select * from prompts_between(date '2026-11-04', date '2026-11-05') order by request_id"
            ).fetchall()
        assert got == expected and len(got) > 0


def test_a_statement_failing_under_streamed_text_raises_its_own_error_and_the_setting_comes_back(
    tmp_path, logs, config
):
    """A failure inside (here a constraint violation, which aborts the caller's transaction) is the error raised, not
    the setting's restore that the aborted transaction refuses; once rolled back, the connection plans as before."""
    from citegate_assets.lib.storage.text_store import streamed_text
    from citegate_assets.lib.storage.warehouse import transaction

    path = ingested(tmp_path / "w.duckdb", logs, config)
    with connect(path) as con:
        [(before,)] = con.sql("select current_setting('disabled_optimizers')").fetchall()
        with pytest.raises(duckdb.ConstraintException):
            with transaction(con), streamed_text(con):
                con.execute("insert into schema_version values (null, now())")  # version is not null
        assert con.sql("select current_setting('disabled_optimizers')").fetchall() == [(before,)]
        with streamed_text(con):  # the macro went with the rolled-back transaction; entered again, it is back
            n = con.sql("select count(*) from prompts_between(date '2026-11-02', date '2026-11-05')").fetchall()
        assert n == con.sql("select count(*) from prompts").fetchall()
        assert con.sql("select current_setting('disabled_optimizers')").fetchall() == [(before,)]
