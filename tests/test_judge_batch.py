"""[judge] mode = "batch": the real openai client over HTTP to a files + batches server on 127.0.0.1
(tests/batch_server.py), a real DuckDB file, and assertions on what the server received and on judge_cache,
judge_batches and support_verdicts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from datetime import date

import polars as pl
import pytest

from citegate_assets.lib.storage.warehouse import connect, ensure_schema
from citegate_assets.lib.support.judge.batch import BatchClient, BatchSettings
from citegate_assets.lib.support.judge.openai_judge import JudgeSettings
from citegate_assets.lib.support.judge.prompt import TEMPLATE_VERSION, render_prompt
from citegate_assets.lib.support.judging import cache_key, judge_items_batch
from citegate_assets.pipeline import RunPlan, run_range

from .batch_server import ScriptedBatchServer
from .helpers import PROFILE_ENCODINGS, scenario_record, write_jsonl
from .judge_server import Reply

DAYS = (date(2026, 11, 2), date(2026, 11, 3))
PRICES = {"judge-b": {"input": 1.0, "output": 2.0}}


def _claim(body: dict) -> str:
    return body["messages"][0]["content"].split("CLAIM:\n", 1)[1].split("\n\nDoes the PASSAGE", 1)[0]


def _answer(body: dict, index: int) -> Reply:
    claim = _claim(body)
    if "good" in claim:
        return Reply("Yes.")
    if "broken" in claim:
        return Reply(status=500)
    return Reply("no")


def items(*claims: str) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "item_id": [f"i{n}" for n in range(len(claims))],
            "passage": [f"Passage about {c}." for c in claims],
            "claim": list(claims),
        }
    )


def make_connect(path):
    @contextmanager
    def _connect():
        with connect(path) as con:
            ensure_schema(con)
            yield con

    return _connect


def client_for(server: ScriptedBatchServer, recorded=None, **batch) -> BatchClient:
    settings = JudgeSettings(base_url=server.base_url, model="judge-b", api_key="sk-batch-secret", max_retries=0)
    return BatchClient(
        settings,
        BatchSettings(**{"poll_s": 0.01, "poll_max_s": 0.05, "wait_s": 10.0, **batch}),
        recorded=recorded,
    )


def rows(path, sql: str) -> list[tuple]:
    with connect(path, read_only=True) as con:
        return con.sql(sql).fetchall()


def test_pairs_go_out_as_one_batch_and_come_back_as_verdicts(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer, polls_to_finish=3) as server:
        client = client_for(server)
        frame = items("good one", "bad one", "broken one", "good one")
        result, facts = judge_items_batch(make_connect(db), frame, client, PRICES, days=DAYS)
    # what the server received: one upload for purpose batch, one batch, one JSONL line per distinct pair
    assert list(server.upload_purposes.values()) == ["batch"]
    [created] = server.created
    assert created["endpoint"] == "/v1/chat/completions" and created["completion_window"] == "24h"
    lines = server.lines_of("batch_0")
    assert len(lines) == 3
    for line, claim in zip(lines, ["good one", "bad one", "broken one"]):
        passage = f"Passage about {claim}."
        assert line["custom_id"] == cache_key("judge-b", TEMPLATE_VERSION, passage, claim)
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        assert line["body"] == {
            "model": "judge-b",
            "messages": [{"role": "user", "content": render_prompt(passage, claim)}],
            "temperature": 0,
            "max_tokens": 5,
        }
    assert server.polls["batch_0"] == 3
    # the verdicts: the same strict parser; a failed request is an error, never a pass, never cached
    assert result["verdict"].to_list() == ["yes", "no", "error", "yes"]
    assert result["raw_answer"].to_list()[:2] == ["Yes.", "no"]
    assert "HTTP 500" in result["raw_answer"][2]
    assert result["cache_hit"].to_list() == [False, False, False, True]
    prompt_tokens = result["prompt_tokens"][0]
    assert result["cost_usd"][0] == pytest.approx((prompt_tokens * 1.0 + 1 * 2.0) / 1e6 * 0.5)  # the batch price
    assert facts["batches_submitted"] == 1 and facts["batches_open"] == 0 and facts["errors"] == 1
    assert sorted(rows(db, "select verdict from judge_cache")) == [("no",), ("yes",)]
    [(status, collected, n)] = rows(db, "select status, collected_at is not null, requests from judge_batches")
    assert (status, collected, n) == ("completed", True, 3)
    # a second run: the answers are cached, the error goes out again in a new batch of one
    with ScriptedBatchServer(lambda b, i: Reply("partial")) as server2:
        result2, facts2 = judge_items_batch(make_connect(db), frame, client_for(server2), PRICES, days=DAYS)
    assert [_claim(line["body"]) for line in server2.lines_of("batch_0")] == ["broken one"]
    assert result2["verdict"].to_list() == ["yes", "no", "partial", "yes"]
    assert result2["cache_hit"].to_list() == [True, True, False, True]


def test_a_failed_batch_gives_errors_and_nothing_cached(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer, final_status="failed") as server:
        result, facts = judge_items_batch(
            make_connect(db), items("good a", "good b"), client_for(server), PRICES, days=DAYS
        )
    assert result["verdict"].to_list() == ["error", "error"]
    assert all("failed" in r and "scripted batch failure" in r for r in result["raw_answer"].to_list())
    assert rows(db, "select count(*) from judge_cache") == [(0,)]
    assert rows(db, "select status, collected_at is not null from judge_batches") == [("failed", True)]
    assert not result["verdict"].is_in(["yes"]).any()


def test_an_expired_batch_keeps_what_was_answered(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer, final_status="expired") as server:
        result, _ = judge_items_batch(
            make_connect(db), items("good a", "good b", "good c", "good d"), client_for(server), PRICES, days=DAYS
        )
    assert result["verdict"].to_list() == ["yes", "yes", "error", "error"]
    assert "expired" in result["raw_answer"][2]
    assert rows(db, "select count(*) from judge_cache") == [(2,)]


def test_missing_and_garbled_lines_are_errors(tmp_path):
    db = tmp_path / "w.duckdb"

    def mangle(lines: list[str]) -> list[str]:
        first = json.loads(lines[1])
        first["response"]["body"] = {"not": "a completion"}
        return [lines[0], json.dumps(first), "{not json", lines[2][:20]]  # line 3 cut: its pair has no result

    with ScriptedBatchServer(_answer, mangle=mangle) as server:
        result, _ = judge_items_batch(
            make_connect(db), items("good a", "good b", "good c"), client_for(server), PRICES, days=DAYS
        )
    assert result["verdict"].to_list() == ["yes", "error", "error"]
    assert "malformed" in result["raw_answer"][1] and "without a result line" in result["raw_answer"][2]
    assert rows(db, "select count(*) from judge_cache") == [(1,)]


def test_deadline_leaves_the_batch_open_and_the_next_run_collects_it_without_paying_twice(tmp_path):
    db = tmp_path / "w.duckdb"
    frame = items("good a", "bad b")
    with ScriptedBatchServer(_answer) as server:
        server.hold = True
        result, facts = judge_items_batch(make_connect(db), frame, client_for(server, wait_s=0.05), PRICES, days=DAYS)
        assert result["verdict"].to_list() == ["error", "error"]
        assert all(r.startswith("batch pending: batch_0 is in_progress") for r in result["raw_answer"].to_list())
        assert facts["batches_open"] == 1 and facts["batch_pending"] == 2
        assert rows(db, "select batch_id, status, collected_at is null from judge_batches") == [
            ("batch_0", "in_progress", True)
        ]
        assert rows(db, "select count(*) from judge_cache") == [(0,)]
        server.hold = False
        result, facts = judge_items_batch(make_connect(db), frame, client_for(server), PRICES, days=DAYS)
    assert len(server.created) == 1 and len(server.uploads) == 1  # resumed, not submitted again
    assert facts["batches_resumed"] == 1 and facts["batches_submitted"] == 0
    assert result["verdict"].to_list() == ["yes", "no"]
    assert rows(db, "select status, collected_at is not null from judge_batches") == [("completed", True)]


def test_a_killed_run_is_resumed_without_a_second_batch(tmp_path):
    """The run is killed (SIGKILL) while it polls; the batch it recorded is collected by the next run."""
    db = tmp_path / "w.duckdb"
    frame = items("good a", "bad b", "good c")
    frame.write_parquet(tmp_path / "items.parquet")
    with ScriptedBatchServer(_answer) as server:
        server.hold = True
        script = textwrap.dedent(
            f"""
            from datetime import date
            import polars as pl
            from tests.test_judge_batch import client_for_url, make_connect
            from citegate_assets.lib.support.judging import judge_items_batch
            frame = pl.read_parquet({str(tmp_path / "items.parquet")!r})
            judge_items_batch(make_connect({str(db)!r}), frame, client_for_url({server.base_url!r}), {{}},
                              days=(date(2026, 11, 2), date(2026, 11, 3)))
            """
        )
        cwd = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        proc = subprocess.Popen([sys.executable, "-c", script], cwd=cwd)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and server.polls.get("batch_0", 0) < 2:
                assert proc.poll() is None, "the run ended before it was killed"
                time.sleep(0.05)
            assert server.polls.get("batch_0", 0) >= 2  # it is waiting on the batch
            # no connection is held while it waits: the file opens, and the batch is recorded
            assert rows(db, "select batch_id, requests, collected_at is null from judge_batches") == [
                ("batch_0", 3, True)
            ]
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        server.hold = False
        result, facts = judge_items_batch(make_connect(db), frame, client_for(server), PRICES, days=DAYS)
    assert len(server.created) == 1 and facts["batches_resumed"] == 1
    assert result["verdict"].to_list() == ["yes", "no", "yes"]


def client_for_url(base_url: str) -> BatchClient:
    """For the killed run's subprocess: polls every 50 ms for a minute."""
    settings = JudgeSettings(base_url=base_url, model="judge-b", api_key="sk-batch-secret", max_retries=0)
    return BatchClient(settings, BatchSettings(poll_s=0.05, poll_max_s=0.05, wait_s=60.0))


def test_batches_are_split_at_max_requests(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer) as server:
        result, facts = judge_items_batch(
            make_connect(db),
            items("good a", "good b", "good c"),
            client_for(server, max_requests=2),
            PRICES,
            days=DAYS,
        )
    assert [len(server.lines_of(b)) for b in sorted(server.batches)] == [2, 1]
    assert facts["batches_submitted"] == 2 and result["verdict"].to_list() == ["yes"] * 3


def test_the_key_never_reaches_the_warehouse(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer, final_status="failed") as server:
        judge_items_batch(make_connect(db), items("good a"), client_for(server), PRICES, days=DAYS)
    with connect(db, read_only=True) as con:
        dump = json.dumps(con.sql("select * from judge_batches").fetchall(), default=str)
    assert "sk-batch-secret" not in dump


# -- the nightly job in batch mode -------------------------------------------------------------------------------

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 2))


@pytest.fixture
def batch_setup(tmp_path, landing, dagster_home, monkeypatch):
    records = [
        scenario_record(t, e, request_id=f"r{i}", logged_at="2026-11-02T10:00:00Z")
        for i, (t, e) in enumerate(PROFILE_ENCODINGS[:3])
    ]
    for r in records:
        for i, c in enumerate(r["citations"]):
            c["claim"] = f"Statement {'ABCDEFGH'[i]}."
    write_jsonl(landing / "a.jsonl", records)
    config = tmp_path / "citegate.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
        "[judge]\nmode = 'batch'\nbatch_wait_s = 0.2\nbatch_poll_s = 0.05\nbatch_poll_max_s = 0.05\n"
        "max_retries = 0\ntimeout_s = 5\n"
        "[judge.prices.judge-batch]\ninput = 1.0\noutput = 2.0\n"
    )
    server = ScriptedBatchServer(lambda body, i: Reply("yes")).start()
    monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-batch")
    yield tmp_path / "w.duckdb", landing, config, server
    server.stop()


def test_nightly_run_in_batch_mode_pending_then_resumed(batch_setup):
    warehouse, landing, config, server = batch_setup
    server.hold = True
    assert run_range(PLAN, landing=landing, warehouse=warehouse, config_file=config).success
    verdicts = rows(warehouse, "select verdict, raw_answer, support_pass from support_verdicts")
    assert verdicts and all(v == "error" and r.startswith("batch pending") and not p for v, r, p in verdicts)
    [sent] = server.created
    lines = server.lines_of("batch_0")
    assert {line["body"]["model"] for line in lines} == {"judge-batch"}
    assert all(line["body"]["max_tokens"] == 5 and len(line["body"]["messages"]) == 1 for line in lines)
    assert {_claim(line["body"]) for line in lines} <= {f"Statement {c}." for c in "ABCDEFGH"}
    assert rows(warehouse, "select count(*) from judge_batches where collected_at is null") == [(1,)]
    server.hold = False
    assert run_range(PLAN, landing=landing, warehouse=warehouse, config_file=config).success
    assert len(server.created) == 1  # the open batch was collected, not paid for twice
    after = rows(warehouse, "select verdict, support_pass, cache_hit, cost_usd from support_verdicts")
    assert len(after) == len(verdicts) and {v for v, *_ in after} == {"yes"}
    assert rows(warehouse, "select count(*) from judge_batches where collected_at is null") == [(0,)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("mode = 'bulk'", r"judge\.mode = 'bulk': expected one of online, batch, cascade"),
        ("batch_discount = 1.5", r"judge\.batch_discount = 1\.5: expected a number in \[0, 1\]"),
        ("batch_poll_s = 0", r"judge\.batch_poll_s = 0: expected a number > 0"),
        ("batch_wait_s = -1", r"judge\.batch_wait_s = -1: expected a number >= 0"),
        ("batch_max_requests = 0", r"judge\.batch_max_requests = 0: expected an integer >= 1"),
    ],
)
def test_batch_keys_are_checked(line, message):
    import tomllib

    from citegate_assets.lib.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=message):
        parse_config(tomllib.loads(f"[judge]\n{line}\n"), "citegate.toml")


def test_online_is_the_default_mode():
    from citegate_assets.lib.config import parse_config

    judge = parse_config({}, None).judge
    assert (judge.mode, judge.batch_discount, judge.batch_wait_s) == ("online", 0.5, 3600.0)


def test_a_run_collects_another_days_open_batch_without_waiting_for_it(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer) as server:
        server.hold = True
        judge_items_batch(make_connect(db), items("good a"), client_for(server, wait_s=0.05), PRICES, days=DAYS)
        server.hold = False
        later = (date(2026, 11, 3), date(2026, 11, 4))
        result, facts = judge_items_batch(make_connect(db), items("bad b"), client_for(server), PRICES, days=later)
    assert result["verdict"].to_list() == ["no"]
    assert facts["batches_submitted"] == 1 and facts["batches_collected"] == 2 and facts["batches_open"] == 0
    assert sorted(rows(db, "select raw_answer from judge_cache")) == [("Yes.",), ("no",)]  # day 1's answer too
    assert rows(db, "select count(*) from judge_batches where collected_at is null") == [(0,)]


def test_a_batch_the_provider_no_longer_knows_is_closed_and_submitted_again(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer) as server:
        server.hold = True
        judge_items_batch(make_connect(db), items("good a"), client_for(server, wait_s=0.05), PRICES, days=DAYS)
        del server.batches["batch_0"]  # 404 from now on
        server.hold = False
        result, facts = judge_items_batch(make_connect(db), items("good a"), client_for(server), PRICES, days=DAYS)
        assert result["verdict"].to_list() == ["error"] and "not_found" in result["raw_answer"][0]
        assert rows(db, "select status, collected_at is not null from judge_batches") == [("not_found", True)]
        result, facts = judge_items_batch(make_connect(db), items("good a"), client_for(server), PRICES, days=DAYS)
    assert result["verdict"].to_list() == ["yes"] and len(server.created) == 2


# -- a batch created but not recorded (the run died between the provider's create and the warehouse's insert) -----


def recorded_in(path):
    """What defs/support.py gives the client: the batch ids the warehouse holds."""

    def recorded() -> list[str]:
        if not path.exists():
            return []
        return [b for (b,) in rows(path, "select batch_id from judge_batches")]

    return recorded


def test_a_batch_created_but_not_recorded_is_adopted_not_paid_twice(tmp_path, monkeypatch):
    import citegate_assets.lib.support.judging as support

    db = tmp_path / "w.duckdb"
    frame = items("good a", "bad b", "good c")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt("killed between batches.create and the warehouse's record")

    with ScriptedBatchServer(_answer) as server:
        server.hold = True
        with monkeypatch.context() as patch:
            patch.setattr(support, "_record_batch", crash)
            with pytest.raises(KeyboardInterrupt):
                judge_items_batch(
                    make_connect(db), frame, client_for(server, recorded=recorded_in(db)), PRICES, days=DAYS
                )
        assert rows(db, "select count(*) from judge_batches") == [(0,)]  # the provider has it, the warehouse not
        [sent] = server.created
        token = sent["metadata"]["citegate_token"]
        assert len(token) == 64 and sent["metadata"]["citegate_days"] == f"{DAYS[0]}..{DAYS[1]}"
        server.hold = False
        client = client_for(server, recorded=recorded_in(db))
        result, facts = judge_items_batch(make_connect(db), frame, client, PRICES, days=DAYS)
    # what the server received: one create, one upload; the second run listed the batches and adopted batch_0
    assert [p for p in server.paths if p == ("POST", "/v1/batches")] == [("POST", "/v1/batches")]
    assert len(server.uploads) == 1 and ("GET", "/v1/batches") in server.paths
    assert client.adopted == ["batch_0"] and facts["batches_submitted"] == 1
    assert result["verdict"].to_list() == ["yes", "no", "yes"]
    assert rows(db, "select batch_id, requests, status, collected_at is not null from judge_batches") == [
        ("batch_0", 3, "completed", True)
    ]
    assert sorted(rows(db, "select raw_answer from judge_cache")) == [("Yes.",), ("Yes.",), ("no",)]


def test_the_token_is_found_through_the_list_pages(tmp_path, monkeypatch):
    import citegate_assets.lib.support.judge.batch as batch_module
    import citegate_assets.lib.support.judging as support

    monkeypatch.setattr(batch_module, "LIST_PAGE", 2)
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer) as server:
        with monkeypatch.context() as patch:
            patch.setattr(support, "_record_batch", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
            with pytest.raises(OSError):
                judge_items_batch(make_connect(db), items("good a"), client_for(server), PRICES, days=DAYS)
        # four later batches of other pairs: the lost one is on the third page of two, newest first
        for n in range(4):
            judge_items_batch(
                make_connect(tmp_path / f"o{n}.duckdb"), items(f"bad {n}"), client_for(server), PRICES, days=DAYS
            )
        server.lists.clear()
        client = client_for(server, recorded=recorded_in(db))
        result, _ = judge_items_batch(make_connect(db), items("good a"), client, PRICES, days=DAYS)
    assert client.adopted == ["batch_0"] and len(server.created) == 5
    assert server.lists == [{"limit": "2"}, {"limit": "2", "after": "batch_3"}, {"limit": "2", "after": "batch_1"}]
    assert result["verdict"].to_list() == ["yes"]


def test_a_recorded_batch_is_never_adopted_again(tmp_path):
    """The same pairs again after a completed batch answered one with an HTTP 500: a new batch, not the old one."""
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(lambda body, i: Reply(status=500)) as server:
        first, _ = judge_items_batch(
            make_connect(db), items("good a"), client_for(server, recorded=recorded_in(db)), PRICES, days=DAYS
        )
        assert first["verdict"].to_list() == ["error"]
        server.answer = lambda body, i: Reply("yes")
        client = client_for(server, recorded=recorded_in(db))
        second, _ = judge_items_batch(make_connect(db), items("good a"), client, PRICES, days=DAYS)
    assert client.adopted == [] and len(server.created) == 2
    assert server.created[0]["metadata"]["citegate_token"] == server.created[1]["metadata"]["citegate_token"]
    assert second["verdict"].to_list() == ["yes"]


def test_a_batch_list_that_fails_creates_nothing(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(_answer) as server:
        server.fail_list = True
        result, facts = judge_items_batch(make_connect(db), items("good a"), client_for(server), PRICES, days=DAYS)
    assert server.created == [] and server.uploads == {}
    assert result["verdict"].to_list() == ["error"] and "listing batches failed: HTTP 503" in result["raw_answer"][0]
    assert rows(db, "select count(*) from judge_cache") == [(0,)]


def test_a_refused_upload_logs_no_pair_text(tmp_path):
    """A provider that quotes the uploaded lines in its error: the run log (Dagster's event log keeps it for good)
    gets the failure's kind and status only; the whole text is the pairs' raw_answer, which retention and forget
    clear."""
    db = tmp_path / "w.duckdb"
    said: list[str] = []
    with ScriptedBatchServer(_answer) as server:
        server.echo_upload_error = True
        result, _ = judge_items_batch(
            make_connect(db), items("good SECRETCLAIM"), client_for(server), PRICES, days=DAYS, log=said.append
        )
    assert result["verdict"].to_list() == ["error"] and "invalid line 1: {" in result["raw_answer"][0]
    assert said == ["judge batch: not submitted (upload failed: HTTP 400): 1 pairs, judged again next run"]
