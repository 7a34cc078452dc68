"""Every folder citegate reads follows the landing folder's rules (lib/core/folders.py): the labels and reviews folders
never follow a link out of themselves, never open a FIFO, a directory or a dangling link, read a file that a link
inside the folder also names once, and give each entry they refuse a reject row of its own that holds none of its
bytes; the reviews log is never written through a link; a config file that is a FIFO is refused without blocking.

The runs are real `citegate run` processes under a timeout, so a regression that blocks fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from citegate_assets.lib.calibration.labels import read_labels
from citegate_assets.lib.config import ConfigError, load_config
from citegate_assets.lib.core import paths as where
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.review.reviews import LOG_NAME, ReviewError, append_review, make_review, read_reviews

from .test_review_web_http import Server, csrf_of, error_text, sign_in

JUDGE_KEY = "sk-planted-judge-key-7731"  # in the run's environment: /proc/self/environ holds it
SECRET = "planted-secret-line-5519"  # in files outside the folders, as valid labels and reviews
PASSWD = "root:x:0:0"
RUN_TIMEOUT_S = 600  # a blocked run fails here instead of hanging the suite


def label(i: int, claim: str = "The plan costs $49.") -> dict:
    return {"id": f"L{i}", "claim": claim, "passage": "The plan costs $49 a month.", "label": "yes", "labeller": "ann"}


def jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def a_review(citation_id: str = "r1#0", claim: str = "The plan costs $49."):
    """A repair: unlike an accept, it adds no hand label, so hand_labels holds only the labels folder's."""
    return make_review(
        citation_id=citation_id, outcome="repair", reviewer="ann", queue_reason="span_missing", claim=claim, passage="p"
    )


def run_citegate(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`citegate run --final` of root/landing into root/w/w.duckdb, labels and reviews from root/labels and
    root/reviews, the judge key planted in its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEGATE_") and k != "DAGSTER_HOME"}
    env["CITEGATE_JUDGE_API_KEY"] = JUDGE_KEY
    command = [sys.executable, "-m", "citegate_assets.cli", "run", "--final", "--quiet", "--config", "<built-in>"]
    command += ["--logs", str(root / "landing"), "--warehouse", str(root / "w" / "w.duckdb")]
    command += ["--labels", str(root / "labels"), "--reviews", str(root / "reviews"), *args]
    return subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


def table_rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql(sql).fetchall()


def columns_holding(db: Path, needle: str) -> list[str]:
    """Every table.column (tables and views) of the DuckDB file with a value containing needle."""
    with duckdb.connect(str(db), read_only=True) as con:
        columns = con.sql(
            "select table_name, column_name from duckdb_columns() where schema_name = 'main' "
            "and data_type not in ('DATE', 'BIGINT', 'INTEGER', 'DOUBLE', 'BOOLEAN', 'FLOAT') "
            "and data_type not like 'TIMESTAMP%'"
        ).fetchall()
        found = []
        for table, column in columns:
            [(n,)] = con.execute(
                f'select count(*) from "{table}" where contains("{column}"::varchar, $needle)', {"needle": needle}
            ).fetchall()
            if n:
                found.append(f"{table}.{column}")
        return found


def files_holding(folder: Path, needle: str) -> list[str]:
    """Every regular file under folder (links not followed) whose bytes hold needle."""
    return [
        str(p.relative_to(folder))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink() and needle.encode() in p.read_bytes()
    ]


def finishes(call: Callable, fifos: list[Path], timeout: float = 60.0):
    """call() in a thread; fails (and unblocks it) when it is still running after timeout."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        for fifo in fifos:  # a reader blocked on it gets end of file
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        thread.join(5)
        pytest.fail(f"blocked for {timeout} s on one of {[f.name for f in fifos]}")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class WatchedFifo:
    """A FIFO with a writer waiting on it: whoever opens it for reading lets the writer through (and reads a line
    holding SECRET), so `opened` says whether anything opened it before release()."""

    def __init__(self, path: Path, line: str) -> None:
        self.path, self.line = path, line
        os.mkfifo(path)
        self.released = threading.Event()
        self.opened = False
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        fd = os.open(self.path, os.O_WRONLY)  # blocks until a reader opens the FIFO
        self.opened = not self.released.is_set()
        try:
            os.write(fd, (self.line + "\n").encode())
        except BrokenPipeError:
            pass
        finally:
            os.close(fd)

    def release(self) -> None:
        self.released.set()
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self.thread.join(10)
        os.close(fd)


@pytest.fixture
def root(tmp_path):
    generate_logs(tmp_path / "landing", days=1, requests_per_day=12, seed=7)
    for name in ("labels", "reviews", "w", "outside"):
        (tmp_path / name).mkdir()
    jsonl(tmp_path / "labels" / "good.jsonl", [label(1), label(2), label(3)])
    append_review(tmp_path / "reviews", a_review())
    return tmp_path


# ------------------------------------------------------------------------------------------------ the pipeline


def test_links_out_of_the_labels_and_reviews_folders_are_never_read(root):
    labels, reviews, outside = root / "labels", root / "reviews", root / "outside"
    private_labels = jsonl(outside / "labels.jsonl", [label(9, claim=SECRET)])
    private_reviews = outside / "reviews.jsonl"
    private_reviews.write_text(a_review("r9#0", claim=SECRET).to_json() + "\n")
    for folder, private in ((labels, private_labels), (reviews, private_reviews)):
        (folder / "env.jsonl").symlink_to("/proc/self/environ")
        (folder / "passwd.jsonl").symlink_to("/etc/passwd")
        (folder / "private.jsonl").symlink_to(private)
        (folder / "gone.jsonl").symlink_to(folder / "later.jsonl")  # dangling, inside the folder
        (folder / "sub.jsonl").mkdir()
    (labels / "again.jsonl").symlink_to(labels / "good.jsonl")  # inside the folder: the file is read once
    (labels / "a-first.jsonl").symlink_to("good.jsonl")  # sorts before it: still read under its own name
    (reviews / "again.jsonl").symlink_to(reviews / LOG_NAME)

    done = run_citegate(root)
    assert done.returncode == 0, done.stderr

    refused = [
        ("env.jsonl", 0, "symlink_outside_folder"),
        ("gone.jsonl", 0, "not_a_file"),
        ("passwd.jsonl", 0, "symlink_outside_folder"),
        ("private.jsonl", 0, "symlink_outside_folder"),
        ("sub.jsonl", 0, "not_a_file"),
    ]
    working, published = root / "w" / "w.duckdb", root / "w" / "w.published.duckdb"
    for db in (working, published):
        sql = "select source_file, line_no, reason from label_rejects order by all"
        assert table_rows(db, sql) == refused
        assert table_rows(db, "select count(*) from label_rejects where raw_line is not null") == [(0,)]
        assert table_rows(db, "select label_id, source_file from hand_labels order by all") == [
            ("L1", "good.jsonl"),
            ("L2", "good.jsonl"),
            ("L3", "good.jsonl"),
        ]
        sql = "select source_file, line_no, split_part(error, ':', 1), raw_line from review_rejects order by all"
        assert table_rows(db, sql) == [(name, 0, reason, None) for name, _, reason in refused]
        assert table_rows(db, "select citation_id, source_file from review_outcomes") == [("r1#0", LOG_NAME)]
        for needle in (JUDGE_KEY, SECRET, PASSWD, "r9#0", "L9"):
            assert columns_holding(db, needle) == [], needle
    for needle in (JUDGE_KEY, SECRET, PASSWD):
        assert files_holding(root / "w", needle) == [], needle


def test_a_fifo_in_the_labels_or_reviews_folder_never_blocks_a_run(root):
    """A FIFO named *.jsonl used to block `citegate run` forever (holding the run lock): now it is one not_a_file
    row, never opened; the files beside it land."""
    watched = [
        WatchedFifo(root / "labels" / "pipe.jsonl", json.dumps(label(8, claim=SECRET))),
        WatchedFifo(root / "reviews" / "pipe.jsonl", a_review("r8#0", claim=SECRET).to_json()),
    ]
    try:
        done = run_citegate(root)
    finally:
        for fifo in watched:
            fifo.release()
    assert done.returncode == 0, done.stderr
    assert [fifo.opened for fifo in watched] == [False, False]  # the run never opened either for reading
    for db in (root / "w" / "w.duckdb", root / "w" / "w.published.duckdb"):
        assert table_rows(db, "select source_file, line_no, reason, detail from label_rejects") == [
            ("pipe.jsonl", 0, "not_a_file", "pipe.jsonl: not a regular file (a FIFO)")
        ]
        assert table_rows(db, "select count(*) from hand_labels") == [(3,)]
        assert table_rows(db, "select source_file, line_no, error from review_rejects") == [
            ("pipe.jsonl", 0, "not_a_file: pipe.jsonl: not a regular file (a FIFO)")
        ]
        assert table_rows(db, "select citation_id from review_outcomes") == [("r1#0",)]
        assert columns_holding(db, SECRET) == []


# ------------------------------------------------------------------------------------------------ the readers


def test_a_labels_file_the_operator_names_is_read_through_its_link_but_never_a_fifo(tmp_path):
    real = jsonl(tmp_path / "real.jsonl", [label(1)])
    (tmp_path / "named.jsonl").symlink_to(real)  # the operator chose this path: its link is followed
    labels, rejects = read_labels(tmp_path / "named.jsonl")
    assert labels["label_id"].to_list() == ["L1"] and rejects.is_empty()

    os.mkfifo(tmp_path / "pipe.jsonl")
    labels, rejects = finishes(lambda: read_labels(tmp_path / "pipe.jsonl"), [tmp_path / "pipe.jsonl"])
    assert labels.is_empty()
    assert rejects.select("source_file", "line_no", "reason", "detail", "raw_line").rows() == [
        ("pipe.jsonl", 0, "not_a_file", f"{tmp_path / 'pipe.jsonl'}: not a regular file (a FIFO)", None)
    ]


def test_a_label_file_that_is_not_utf8_is_one_reject_row_and_the_files_beside_it_land(tmp_path):
    jsonl(tmp_path / "a.jsonl", [label(1)])
    latin1 = json.dumps(label(2, claim="caf\u00e9"), ensure_ascii=False).encode("latin-1") + b"\n"
    (tmp_path / "b.jsonl").write_bytes(latin1)
    jsonl(tmp_path / "c.jsonl", [label(3)])
    labels, rejects = read_labels(tmp_path)
    assert labels["label_id"].to_list() == ["L1", "L3"]
    assert rejects.select("source_file", "line_no", "reason", "detail", "raw_line").rows() == [
        (
            "b.jsonl",
            0,
            "file_unreadable",
            f"b.jsonl: not UTF-8 (byte {latin1.index(0xE9)}); none of its lines was read",
            None,
        )
    ]


def test_reading_the_reviews_folder_never_blocks_on_a_fifo(tmp_path):
    append_review(tmp_path, a_review())
    os.mkfifo(tmp_path / "pipe.jsonl")
    lines = finishes(lambda: read_reviews(tmp_path), [tmp_path / "pipe.jsonl"])
    assert [(ln.file, ln.line_no, ln.error, ln.raw) for ln in lines if ln.review is None] == [
        ("pipe.jsonl", 0, "not_a_file: pipe.jsonl: not a regular file (a FIFO)", None)
    ]
    assert [ln.review.citation_id for ln in lines if ln.review] == ["r1#0"]


# ------------------------------------------------------------------------------------------------ the writer


def test_the_reviews_log_is_never_written_through_a_link_nor_into_a_fifo(tmp_path):
    folder, log = tmp_path / "reviews", tmp_path / "reviews" / LOG_NAME
    folder.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"not a reviews log\n")

    log.symlink_to(victim)
    with pytest.raises(ReviewError, match=rf"{LOG_NAME}: a symbolic link, not the reviews log file; nothing was"):
        append_review(folder, a_review())
    assert victim.read_bytes() == b"not a reviews log\n"

    log.unlink()
    log.symlink_to(tmp_path / "created-through-the-link.jsonl")  # dangling: O_CREAT would create its target
    with pytest.raises(ReviewError, match="a symbolic link"):
        append_review(folder, a_review())
    assert not (tmp_path / "created-through-the-link.jsonl").exists()

    log.unlink()
    os.mkfifo(log)
    with pytest.raises(ReviewError, match=rf"{LOG_NAME}: a FIFO, not the reviews log file; nothing was written"):
        finishes(lambda: append_review(folder, a_review()), [log])

    log.unlink()
    log.mkdir()
    with pytest.raises(ReviewError, match=rf"{LOG_NAME}: a directory, not the reviews log file"):
        append_review(folder, a_review())

    log.rmdir()
    first, second = a_review("c-1"), a_review("c-2")
    append_review(folder, first)
    append_review(folder, second)
    assert log.read_bytes() == f"{first.to_json()}\n{second.to_json()}\n".encode()
    assert not log.is_symlink() and os.stat(log).st_mode & 0o777 == 0o600


def test_the_review_page_refuses_a_log_replaced_by_a_link_and_reads_past_odd_entries(root):
    assert run_citegate(root).returncode == 0
    [(citation_id,)] = table_rows(
        root / "w" / "w.published.duckdb", "select citation_id from citation_queue order by citation_id limit 1"
    )
    site = root / "w"  # Server's layout: site/w.duckdb beside site/reviews
    reviews = site / "reviews"
    reviews.mkdir()
    victim = root / "outside" / "victim.jsonl"
    victim.write_bytes(b"kept as it is\n")
    (reviews / LOG_NAME).symlink_to(victim)
    (reviews / "gone.jsonl").symlink_to(reviews / "later.jsonl")  # a dangling link used to fail every page
    (reviews / "env.jsonl").symlink_to("/proc/self/environ")
    server = Server(site, env={"CITEGATE_JUDGE_API_KEY": JUDGE_KEY})
    try:
        session = sign_in(server)
        assert session.get(f"{server.base}/").status_code == 200
        page = session.get(f"{server.base}/entry", params={"id": citation_id})
        assert page.status_code == 200 and JUDGE_KEY not in page.text
        decide = {"csrf": csrf_of(page.text), "citation_id": citation_id, "outcome": "accept"}
        refused = session.post(f"{server.base}/decide", data=decide)
        assert refused.status_code == 400
        assert error_text(refused.text) == (
            f"not recorded: {reviews / LOG_NAME}: a symbolic link, not the reviews log file; nothing was written"
        )
        assert victim.read_bytes() == b"kept as it is\n"

        (reviews / LOG_NAME).unlink()
        assert session.post(f"{server.base}/decide", data=decide).status_code == 200
        [line] = [ln for ln in read_reviews(reviews) if ln.review]
        assert (line.file, line.review.citation_id, line.review.reviewer) == (LOG_NAME, citation_id, "Ann Reviewer")
        assert not (reviews / LOG_NAME).is_symlink()
    finally:
        server.stop()


# ------------------------------------------------------------------------------------------------ named files


def test_a_config_file_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "citegate.toml"
    os.mkfifo(fifo)
    with pytest.raises(where.SettingsError, match=r"citegate\.toml: not a regular file \(a FIFO\), not a config file"):
        finishes(lambda: where.resolve(config=str(fifo), env={}, cwd=tmp_path), [fifo])
    with pytest.raises(ConfigError, match=r"citegate\.toml: not a regular file \(a FIFO\), not a config file"):
        finishes(lambda: load_config(fifo), [fifo])
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(where.SettingsError, match=r"folder\.toml: not a regular file \(a directory\)"):
        where.resolve(config=str(tmp_path / "folder.toml"), env={}, cwd=tmp_path)


def test_the_review_pages_secret_and_tokens_files_are_never_read_from_a_fifo(tmp_path):
    from citegate_assets.review_web.auth import AuthError, TokenFile, load_secret

    secret, tokens = tmp_path / "reviews.web-secret", tmp_path / "tokens.txt"
    for fifo in (secret, tokens):
        os.mkfifo(fifo, 0o600)
    with pytest.raises(AuthError, match=r"reviews\.web-secret: not a regular file \(a FIFO\)"):
        finishes(lambda: load_secret(secret), [secret])
    with pytest.raises(AuthError, match=r"tokens\.txt: not a regular file \(a FIFO\)"):
        finishes(lambda: TokenFile(tokens), [tokens])
