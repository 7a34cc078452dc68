"""`citegate forget --request-id` (docs/retention.md): the request's text leaves the working warehouse, the published
copy and every lake file, an audit row without text stays, unknown ids exit 1, the landing lines are named, and
re-ingesting such a line does not bring the text back."""

import json
from datetime import date
from pathlib import Path

import duckdb
import pytest

from citegate_assets.cli import main
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.storage import lake as lake_module
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import copy_run

DAY1, DAY2 = date(2026, 11, 2), date(2026, 11, 3)


def holding(con: duckdb.DuckDBPyConnection, needle: str) -> list[str]:
    """Every table.column (tables and views) of the database with a value containing needle."""
    [(db,)] = con.sql("select current_database()").fetchall()
    columns = con.sql(
        "select table_name, column_name from duckdb_columns() where database_name = $db and schema_name = 'main' "
        "and data_type not in ('DATE', 'BIGINT', 'INTEGER', 'DOUBLE', 'BOOLEAN') and data_type not like 'TIMESTAMP%'",
        params={"db": db},
    ).fetchall()
    found = []
    for table, column in columns:
        [(n,)] = con.sql(
            f'select count(*) from "{table}" where contains("{column}"::varchar, $needle)', params={"needle": needle}
        ).fetchall()
        if n:
            found.append(f"{table}.{column}")
    return found


def lake_holding(lake: Path, needle: str) -> list[str]:
    """Every file under the lake (data files, the Delta logs and checkpoints) whose bytes, or rows for a Parquet
    file (compressed pages hide the bytes), hold needle."""
    found = []
    con = duckdb.connect()
    for file in sorted(p for p in lake.rglob("*") if p.is_file()):
        n = 0
        if file.name.endswith(".parquet"):
            names = [r[0] for r in con.sql(f"describe select * from read_parquet('{file}')").fetchall()]
            text = " || ".join(f"coalesce(\"{n}\"::varchar, '')" for n in names)
            [(n,)] = con.sql(
                f"select count(*) from read_parquet('{file}') where contains({text}, $needle)",
                params={"needle": needle},
            ).fetchall()
        if n or needle.encode() in file.read_bytes():
            found.append(str(file.relative_to(lake)))
    return found


def night_env(mp: pytest.MonkeyPatch, root: Path) -> None:
    mp.setenv("CITEGATE_REVIEWS", str(root / "reviews"))
    mp.delenv("CITEGATE_LAKE", raising=False)
    mp.delenv("CITEGATE_PUBLISHED", raising=False)


@pytest.fixture(scope="module")
def first_night(tmp_path_factory):
    """The first run over both days, made once for the module: each test goes on from a copy of its files (the
    working file, the text files, the lake, the published copy)."""
    root = tmp_path_factory.mktemp("forget-first-night")
    generate_logs(root / "landing", days=2, requests_per_day=12, seed=11, malformed=True)
    (root / "citegate.toml").write_text("")
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(
        (Path(__file__).resolve().parents[1] / "dagster_home" / "dagster.yaml").read_text()
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        night_env(mp, root)
        plan = RunPlan(DAY1, DAY2)
        assert run_range(
            plan, landing=root / "landing", warehouse=root / "w.duckdb", config_file=root / "citegate.toml"
        ).success
    return root


@pytest.fixture
def gated(first_night, tmp_path, dagster_home, monkeypatch):
    copy_run(first_night, tmp_path)
    landing, config, warehouse = tmp_path / "landing", tmp_path / "citegate.toml", tmp_path / "w.duckdb"
    night_env(monkeypatch, tmp_path)

    def run(start=DAY1, end=DAY2):
        return run_range(RunPlan(start, end), landing=landing, warehouse=warehouse, config_file=config)

    paths = {"--warehouse": warehouse, "--config": config, "--published": warehouse.with_name("w.published.duckdb")}
    return run, landing, paths


def test_forget_removes_the_text_everywhere_and_leaves_an_audit_row(gated, capsys):
    run, landing, paths = gated
    warehouse, published = paths["--warehouse"], paths["--published"]
    lake = warehouse.with_name("w.lake")
    with connect(warehouse, read_only=True) as con:
        # a request of day 1 with a queue entry and claims no other request shares
        [(request_id, prompt_raw, answer, source_file, source_line)] = con.sql(
            "select p.request_id, p.prompt_raw, p.answer, p.source_file, p.source_line from prompts p "
            "where p.day = $d and p.request_id in (select request_id from citation_queue where passage is not null) "
            "and not exists (select 1 from citations c join citations o on o.claim = c.claim "
            "and o.request_id <> c.request_id where c.request_id = p.request_id) order by 1 limit 1",
            params={"d": DAY1},
        ).fetchall()
        claims = [
            c
            for (c,) in con.sql(
                "select claim from citations where request_id = $r", params={"r": request_id}
            ).fetchall()
        ]
        assert holding(con, prompt_raw) and holding(con, claims[0])
        [(others,)] = con.sql("select count(*) from prompts where prompt_raw is not null").fetchall()
        [(queued,)] = con.sql(
            "select min(citation_id) from citation_queue where request_id = $r and passage is not null",
            params={"r": request_id},
        ).fetchall()
    # a reviewer accepted one of its entries: the reviews log and, through it, the calibration labels hold its claim
    reviews = paths["--warehouse"].parent / "reviews"
    review = ["review", queued, "accept", "--reviewer", "ann", "--reviews", str(reviews)]
    assert main(review + [str(x) for pair in paths.items() if pair[0] != "--lake" for x in pair]) == 0
    assert run(DAY2, DAY2).success  # reads the reviews log
    with connect(warehouse, read_only=True) as con:
        assert con.sql(
            "select count(*) from review_outcomes where citation_id = $c", params={"c": queued}
        ).fetchall() == [(1,)]
        assert con.sql("select count(*) from hand_labels where label_id like 'review:%'").fetchall() == [(1,)]
    capsys.readouterr()
    old_files = [Path(f) for f in lake_module.current_files(lake, "prompts")]
    assert lake_holding(lake, claims[0])
    needles = [prompt_raw, answer, *claims]

    args = ["forget", "--request-id", request_id, "no-such-request", "--why", "user asked", "--by", "dpo"]
    code = main(args + [str(x) for pair in paths.items() for x in pair])
    out, err = capsys.readouterr()
    assert code == 1, err  # one id is unknown; the known one is still forgotten
    assert "unknown request id no-such-request" in err
    assert f"forgotten {request_id}: prompts 1" in out
    assert f"{source_file} line {source_line} (prompt of {request_id})" in out
    assert "may lose its data" in out
    assert "still in the reviews log" in out and "(review of" in out

    with connect(warehouse, read_only=True) as con:
        for needle in needles:
            assert holding(con, needle) == [], needle
        rows = con.sql("select request_id, forgotten_by, reason, rows_touched from forgotten_requests").fetchall()
        assert [r[:3] for r in rows] == [(request_id, "dpo", "user asked")]
        touched = json.loads(rows[0][3])
        assert touched["prompts"] == 1 and touched["citations"] == len(claims) and touched["citation_queue"] >= 1
        assert touched["review_outcomes"] == 1 and touched["hand_labels"] == 1
        assert con.sql(
            "select outcome, claim from review_outcomes where citation_id = $c", params={"c": queued}
        ).fetchall() == [("accept", None)]  # the decision stays, its text goes
        # the rest is untouched: hashes stay, other prompts keep their text
        [(sha, kept_text)] = con.sql(
            "select prompt_sha256 = sha256($p), (select count(*) from prompts where prompt_raw is not null) "
            "from prompts where request_id = $r",
            params={"p": prompt_raw, "r": request_id},
        ).fetchall()
        assert sha and kept_text == others - 1
    with connect(published, read_only=True) as con:
        for needle in needles:
            assert holding(con, needle) == [], needle
        assert con.sql("select request_id from forgotten_requests").fetchall() == [(request_id,)]
    for needle in needles:
        assert lake_holding(lake, needle) == [], needle
    assert not any(f.exists() for f in old_files if "day=2026-11-02" in str(f))  # superseded at once

    # the producer's line, ingested again, is refused as a known request and its text does not come back
    (landing / "again.jsonl").write_text((landing / source_file).read_text().splitlines()[source_line - 1] + "\n")
    again = run(DAY2, DAY2)
    assert again.success
    with connect(warehouse, read_only=True) as con:
        assert con.sql(
            "select count(*), count(prompt_raw) from prompts where request_id = $r", params={"r": request_id}
        ).fetchall() == [(1, 0)]
        assert con.sql(
            "select reason, raw_line from ingest_rejects where request_id = $r and source_file = 'again.jsonl'",
            params={"r": request_id},
        ).fetchall() == [("duplicate_request_id", None)]
        # the reviews log was read again: its snapshot is dropped again before publishing
        assert con.sql("select count(*) from hand_labels where label_id like 'review:%'").fetchall() == [(0,)]
        for needle in needles:
            assert holding(con, needle) == [], needle
    with connect(published, read_only=True) as con:
        for needle in needles:
            assert holding(con, needle) == [], needle

    # the forgotten request's day is never re-gated
    refused = run(DAY1, DAY1)
    assert not refused.success
    [evaluation] = [e for e in refused.get_asset_check_evaluations() if e.check_name == "run_days_hold_their_text"]
    assert not evaluation.passed and "2026-11-02: 1 of" in evaluation.description and "forget" in evaluation.description


def test_forget_of_only_unknown_ids_changes_nothing(gated, capsys):
    _, _, paths = gated
    before = paths["--published"].stat().st_mtime_ns
    code = main(["forget", "--request-id", "nope"] + [str(x) for pair in paths.items() for x in pair])
    assert code == 1
    assert "unknown request id nope" in capsys.readouterr().err
    assert paths["--published"].stat().st_mtime_ns == before  # nothing known: nothing published
    with connect(paths["--warehouse"], read_only=True) as con:
        assert con.sql("select count(*) from forgotten_requests").fetchall() == [(0,)]


def test_a_forgotten_entry_still_shows_in_the_queue_and_the_review_page(gated, capsys):
    """An entry whose text is gone is still an entry: `citegate queue show` and the review page show it, saying
    the text was removed, and never crash on the missing text."""
    from urllib.parse import urlencode
    from urllib.request import Request, urlopen

    from .test_review_web_http import Server

    _run, _landing, paths = gated
    warehouse = paths["--warehouse"]
    with connect(warehouse, read_only=True) as con:
        [(request_id, citation_id)] = con.sql(
            "select request_id, min(citation_id) from citation_queue group by 1 order by 1 limit 1"
        ).fetchall()
    assert main(["forget", "--request-id", request_id] + [str(x) for pair in paths.items() for x in pair]) == 0
    capsys.readouterr()
    shown = ["queue", "show", citation_id, "--warehouse", str(warehouse), "--published", str(paths["--published"])]
    assert main(shown) == 0
    out = capsys.readouterr().out
    assert citation_id in out and "text removed" in out
    server = Server(warehouse.parent, "--auth", "proxy", "--auth-header", "X-User")
    try:
        for path in ("/?status=open", "/entry?" + urlencode({"id": citation_id})):
            with urlopen(Request(server.base + path, headers={"X-User": "ann"}), timeout=30) as page:
                body = page.read().decode()
                assert page.status == 200 and "text removed" in body, path
    finally:
        server.stop()
