"""The judge's keys never leave as text (lib/support/judge/secrets.py): a gateway that echoes the key it was sent, in a
200
reply, a 4xx/5xx error body or a batch result, as written, JSON-escaped or URL-escaped, leaves no form of it in the
warehouse file, its WAL, the text files, the lake, the published copy, the Dagster home or what the CLI prints.
The real openai client talks real HTTP to the servers of tests/judge_server.py and tests/batch_server.py, which
echo the key they received."""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path

import duckdb
import pytest

from citegate_assets.cli import main
from citegate_assets.lib.config import parse_config
from citegate_assets.lib.support.judge.base import JudgeRequest
from citegate_assets.lib.support.judge.batch import BatchClient, BatchSettings
from citegate_assets.lib.support.judge.factory import configured_secrets, make_judge, make_secondary_judge
from citegate_assets.lib.support.judge.openai_judge import JudgeSettings
from citegate_assets.lib.support.judge.secrets import MASK, SecretMask
from citegate_assets.lib.support.judging import judge_items_batch

from .batch_server import ScriptedBatchServer
from .helpers import PROFILE_ENCODINGS, scenario_record, write_jsonl
from .judge_server import KEY, KEY_JSON, KEY_URL, Reply, ScriptedJudgeServer, echo_key
from .test_judge_batch import DAYS, items, make_connect

# '/' and '+' make the key's JSON-escaped and URL-escaped forms differ from it as written
PRIMARY_KEY = "sk-echo/Ab+9xQ==Z7kq"
SECOND_KEY = "sk-second+Lw81/YqTz"
DAY = "2026-11-02"

# what the gateway answers, by the call's index: every way a reply or an error can carry the key it was sent
ECHOES = [
    Reply("yes"),  # verdicts the secondary judge is then asked about (judge_agreement)
    Reply("no"),
    Reply(f"Yes. (request authorized by {KEY})"),
    Reply('no {"echo": {"authorization": "Bearer ' + KEY_JSON + '"}}'),
    Reply(status=401, text=f"Incorrect API key provided: {KEY}"),
    Reply(status=503, text=f"upstream refused /v1/chat?key={KEY_URL}"),
    Reply(status=400, body=b'{"error": {"message": "bad key <key:json>", "type": "invalid_request_error"}}'),
    Reply(f"partial; the other configured key is {SECOND_KEY}"),
]


def unescaped(text: str) -> str:
    """text with JSON escapes (any depth) and URL escapes undone, until nothing changes."""
    previous = None
    while previous != text:
        previous = text
        text = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
        text = re.sub(r"\\+([/\"])", r"\1", text)
        text = urllib.parse.unquote(text)
    return text


def holds_a_key(text: str) -> bool:
    plain = unescaped(text)
    return PRIMARY_KEY in plain or SECOND_KEY in plain


def files_holding_a_key(root: Path) -> list[str]:
    """Every file under root whose bytes hold a form of a key; a DuckDB file or a Parquet file also by its rows
    (their strings may be stored compressed)."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = str(path.relative_to(root))
        if holds_a_key(path.read_bytes().decode("utf-8", "replace")):
            found.append(name)
        elif path.suffix == ".duckdb" and holds_a_key(_duckdb_rows(path)):
            found.append(f"{name} (rows)")
        elif path.suffix == ".parquet" and holds_a_key(_parquet_rows(path)):
            found.append(f"{name} (rows)")
    return found


def _duckdb_rows(path: Path) -> str:
    with duckdb.connect(str(path), read_only=True) as con:
        tables = con.sql("select table_name from duckdb_tables() where schema_name = 'main'").fetchall()
        return "\n".join(repr(con.sql(f'select * from "{t}"').fetchall()) for (t,) in tables)


def _parquet_rows(path: Path) -> str:
    with duckdb.connect() as con:
        return repr(con.sql("select * from read_parquet($p)", params={"p": str(path)}).fetchall())


def test_the_mask_takes_every_escaped_form_of_every_secret():
    mask = SecretMask([PRIMARY_KEY, SECOND_KEY, "abc", "unused"])
    token = f"Bearer {PRIMARY_KEY}"
    for form in (
        PRIMARY_KEY,
        echo_key(KEY_JSON, token),
        echo_key(KEY_URL, token),
        json.dumps(PRIMARY_KEY),
        json.dumps(json.dumps({"k": PRIMARY_KEY})),
        PRIMARY_KEY.replace("/", "\\/"),
        SECOND_KEY,
    ):
        masked = mask(f"before {form} after")
        assert not holds_a_key(masked), (form, masked)
        assert masked.startswith("before ") and masked.endswith(" after") and MASK in masked
    assert mask("Authorization: Bearer tok-123 ok") == f"Authorization: Bearer {MASK} ok"
    # short values and the no-key placeholder would blank ordinary words: not secrets
    assert mask("abc unused yes") == "abc unused yes"
    assert "sk-echo" not in repr(mask) and mask.count == 2


def test_every_configured_key_variable_is_masked_by_both_judges(monkeypatch):
    monkeypatch.setenv("CITEGATE_JUDGE_API_KEY", PRIMARY_KEY)
    monkeypatch.setenv("OTHER_JUDGE_KEY", SECOND_KEY)
    cfg = parse_config(
        {
            "judge": {
                "base_url": "https://user:pa55word@judge.example/v1?api-key=query-secret",
                "secondary": {"model": "second", "api_key_env": "OTHER_JUDGE_KEY"},
            }
        },
        None,
    ).judge
    secrets = configured_secrets(cfg)
    assert {PRIMARY_KEY, SECOND_KEY, "pa55word", "query-secret"} <= set(secrets)
    primary, secondary = make_judge(cfg), make_secondary_judge(cfg)
    for judge in (primary, secondary):
        text = f"{PRIMARY_KEY} {SECOND_KEY} pa55word query-secret"
        assert judge.secret_mask(text) == " ".join([MASK] * 4)  # type: ignore[union-attr]


# -- online: the nightly run through the CLI ------------------------------------------------------------------------


def judged_records(n: int) -> list[dict]:
    """n requests whose judged claims all differ (each pair is a call of its own)."""
    records = [
        scenario_record(t, e, request_id=f"r{i}", logged_at=f"{DAY}T10:00:00Z")
        for i, (t, e) in enumerate(PROFILE_ENCODINGS[:n])
    ]
    for r in records:
        for c in r["citations"]:
            c["claim"] = f"{c['claim']} of {r['request_id']}"
    return records


@pytest.fixture
def echoing(tmp_path, landing, dagster_home, monkeypatch):
    write_jsonl(landing / "a.jsonl", judged_records(len(PROFILE_ENCODINGS)))
    config = tmp_path / "citegate.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
        "[judge]\nmax_retries = 0\ntimeout_s = 5\nbreaker_threshold = 1000\n"
        "[judge.secondary]\nmodel = 'judge-second'\napi_key_env = 'CITEGATE_SECOND_KEY'\nsample_rate = 1.0\n"
    )
    used: list[int] = []

    def answer(request: dict, index: int) -> Reply:
        used.append(index % len(ECHOES))
        return ECHOES[index % len(ECHOES)]

    server = ScriptedJudgeServer(answer).start()
    monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-echo")
    monkeypatch.setenv("CITEGATE_JUDGE_API_KEY", PRIMARY_KEY)
    monkeypatch.setenv("CITEGATE_SECOND_KEY", SECOND_KEY)
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    monkeypatch.delenv("CITEGATE_LAKE", raising=False)
    monkeypatch.delenv("CITEGATE_PUBLISHED", raising=False)
    yield tmp_path, landing, config, server, used
    server.stop()


def test_an_echoed_key_reaches_no_file_and_no_output(echoing, capfd):
    root, landing, config, server, used = echoing
    warehouse = root / "w.duckdb"
    args = ["--warehouse", str(warehouse), "--config", str(config)]
    assert main(["run", "--logs", str(landing), *args]) == 0
    # the gateway did echo both keys, in every form, in replies and in error bodies
    sent = {h["authorization"] for h in server.request_headers}
    assert sent == {f"Bearer {PRIMARY_KEY}", f"Bearer {SECOND_KEY}"}
    assert set(used) == set(range(len(ECHOES)))
    with duckdb.connect(str(warehouse), read_only=True) as con:
        answers = con.sql(
            "select raw_answer from support_verdicts union all select raw_answer from judge_cache"
        ).fetchall()
        second = con.sql("select secondary_raw_answer from judge_agreement").fetchall()
        queued = con.sql(
            "select citation_id from citation_queue where judge_raw_answer like '%***%' order by 1 limit 1"
        ).fetchall()
    assert any(MASK in (a or "") for (a,) in answers) and any(MASK in (a or "") for (a,) in second)
    assert queued, "no queue entry carries a masked judge answer"
    assert main(["queue", "show", queued[0][0], *args[:2]]) == 0
    assert main(["queue", "--limit", "50", *args[:2]]) == 0
    out, err = capfd.readouterr()
    assert not holds_a_key(out + err)
    assert (root / "w.lake").is_dir() and (root / "w.published.duckdb").is_file()
    assert files_holding_a_key(root / "landing") == []
    assert files_holding_a_key(root) == []


# -- batch: the Batch API's result lines, error lines and a failed batch's errors -------------------------------------


def test_an_echoed_key_in_a_batch_run_reaches_no_file(tmp_path, landing, dagster_home, monkeypatch):
    write_jsonl(landing / "a.jsonl", judged_records(4))
    config = tmp_path / "citegate.toml"
    config.write_text(
        "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
        "[judge]\nmode = 'batch'\nbatch_wait_s = 5\nbatch_poll_s = 0.05\nbatch_poll_max_s = 0.05\n"
        "max_retries = 0\ntimeout_s = 5\n"
    )
    answers = [Reply(status=400, text=f"bad key {KEY_URL}"), Reply(f"yes {KEY}"), Reply(f"no {KEY_JSON}"), Reply("yes")]
    with ScriptedBatchServer(lambda body, i: answers[i % len(answers)]) as server:
        monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-batch")
        monkeypatch.setenv("CITEGATE_JUDGE_API_KEY", PRIMARY_KEY)
        monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
        warehouse = tmp_path / "w.duckdb"
        assert main(["run", "--logs", str(landing), "--warehouse", str(warehouse), "--config", str(config)]) == 0
        outputs = [
            server.files[b["output_file_id"]] + server.files[b["error_file_id"]] for b in server.batches.values()
        ]
    assert outputs and all(holds_a_key(o.decode()) for o in outputs)  # the provider's files did hold the key
    with duckdb.connect(str(warehouse), read_only=True) as con:
        kinds = dict(con.sql("select verdict, count(*) from support_verdicts group by 1").fetchall())
    assert {"yes", "unparseable", "error"} <= set(kinds)
    assert files_holding_a_key(tmp_path) == []


def test_a_failed_batch_echoing_the_key_leaves_it_in_no_row(tmp_path):
    db = tmp_path / "w.duckdb"
    with ScriptedBatchServer(final_status="failed") as server:
        server.failure_message = f"key {KEY} is not allowed ({KEY_JSON})"
        settings = JudgeSettings(base_url=server.base_url, model="judge-b", api_key=PRIMARY_KEY, max_retries=0)
        client = BatchClient(settings, BatchSettings(poll_s=0.01, poll_max_s=0.05, wait_s=10.0))
        result, _ = judge_items_batch(make_connect(db), items("good a", "good b"), client, {}, days=DAYS)
        [batch] = server.batches.values()
    assert holds_a_key(json.dumps(batch["errors"]))  # the provider echoed it
    assert result["verdict"].to_list() == ["error", "error"]
    assert all(MASK in answer and not holds_a_key(answer) for answer in result["raw_answer"].to_list())
    with duckdb.connect(str(db), read_only=True) as con:
        [(detail,)] = con.sql("select detail from judge_batches").fetchall()
    assert MASK in detail
    assert files_holding_a_key(tmp_path) == []


def test_a_judge_reply_echoing_the_key_is_masked_by_the_client_too():
    with ScriptedJudgeServer(lambda req, i: ECHOES[2 + i]) as server:
        judge = make_judge(
            parse_config({"judge": {"base_url": server.base_url, "max_retries": 0, "concurrency": 1}}, None).judge,
            env={"CITEGATE_JUDGE_API_KEY": PRIMARY_KEY},
        )
        results = judge.judge([JudgeRequest(f"k{i}", "passage", "claim") for i in range(5)])
    errors = [r.raw_answer or "" for r in results if r.verdict == "error"]
    assert len(errors) == 3 and all(MASK in e and not holds_a_key(e) for e in errors)
