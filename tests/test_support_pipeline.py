"""The support gate end to end: the nightly job judges through a real OpenAI-compatible server on
127.0.0.1 (the real openai client, real HTTP), caches, records, and calibrates on hand labels."""

import json
import shutil
from datetime import date
from pathlib import Path

import pytest

from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.lib.support.judge.prompt import render_prompt
from citegate_assets.pipeline import RunPlan, run_calibration, run_range

from .helpers import PROFILE_ENCODINGS, copy_run, scenario_record, write_jsonl
from .judge_server import Reply, ScriptedJudgeServer

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 2))


def _answer(request: dict, index: int) -> Reply:
    content = request["messages"][0]["content"]
    claim = content.split("CLAIM:\n", 1)[1].split("\n\nDoes the PASSAGE", 1)[0]
    if "flaky" in claim:
        return Reply(status=503)
    if claim == "Statement A.":
        return Reply("Yes.")
    return Reply("partial, mostly")  # unparseable: must never pass


def write_inputs(root) -> None:
    """root/landing (a record per profile and encoding), root/labels and root/citegate.toml."""
    landing = root / "landing"
    landing.mkdir()
    records = [
        scenario_record(t, e, request_id=f"r{i}", logged_at="2026-11-02T10:00:00Z")
        for i, (t, e) in enumerate(PROFILE_ENCODINGS)
    ]
    for r in records:
        for i, c in enumerate(r["citations"]):
            c["claim"] = f"Statement {'ABCDEFGH'[i]}."
    records[0]["citations"][0]["claim"] = "A flaky claim."
    write_jsonl(landing / "a.jsonl", records)
    labels = root / "labels"
    labels.mkdir()
    write_jsonl(
        labels / "l.jsonl",
        [
            {
                "id": f"l{i}",
                "claim": f"Statement {'ABC'[i % 3]}.",
                "passage": f"Passage {i}.",
                "label": ("yes", "no", "partial")[i % 3],
                "labeller": "t",
            }
            for i in range(9)
        ],
    )
    (root / "citegate.toml").write_text(
        "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
        "[judge]\nmax_retries = 1\nbackoff_base_s = 0.01\ntimeout_s = 5\nbreaker_threshold = 50\n"
        "[judge.prices.judge-test]\ninput = 1.0\noutput = 2.0\n"
        "[calibration]\nlabels = 'labels'\n"
    )


def serve_judge(mp: pytest.MonkeyPatch) -> ScriptedJudgeServer:
    server = ScriptedJudgeServer(_answer).start()
    mp.setenv("CITEGATE_JUDGE_BASE_URL", server.base_url)
    mp.setenv("CITEGATE_JUDGE_MODEL", "judge-test")
    mp.setenv("CITEGATE_JUDGE_API_KEY", "sk-test-not-logged")
    return server


@pytest.fixture(scope="module")
def first_night(tmp_path_factory):
    """One nightly run judging through the server, shared by the tests that read it or go on from it: (its folder,
    the run's result, the server that judged it, stopped)."""
    root = tmp_path_factory.mktemp("first-night")
    write_inputs(root)
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        server = serve_judge(mp)
        try:
            result = run_range(
                PLAN, landing=root / "landing", warehouse=root / "w.duckdb", config_file=root / "citegate.toml"
            )
        finally:
            server.stop()
    assert result.success
    return root, result, server


@pytest.fixture
def after_first_night(first_night, tmp_path, dagster_home, monkeypatch):
    """The first night's files in this test's folder and a new server answering as the first one did: (warehouse,
    landing, config, server)."""
    copy_run(first_night[0], tmp_path)
    server = serve_judge(monkeypatch)
    yield tmp_path / "w.duckdb", tmp_path / "landing", tmp_path / "citegate.toml", server
    server.stop()


def test_judges_only_passing_citations_through_the_server(first_night):
    root, _, server = first_night
    warehouse = root / "w.duckdb"
    with connect(warehouse, read_only=True) as con:
        ok = con.sql("select count(*) from provenance_results where reason = 'ok'").fetchall()[0][0]
        verdicts = con.sql(
            "select citation_id, verdict, raw_answer, support_pass, judge_model, cache_hit "
            "from support_verdicts order by 1"
        ).fetchall()
        bodies = {
            b
            for (b,) in con.sql(
                "select substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start) "
                "from prompts p join prompt_sections s on s.request_id = p.request_id"
            ).fetchall()
        }
    assert len(verdicts) == ok == 2 * len(PROFILE_ENCODINGS)
    by_id = {v[0]: v for v in verdicts}
    assert by_id["r1#0"][1:5] == ("yes", "Yes.", True, "judge-test")
    assert by_id["r1#7"][1:4] == ("unparseable", "partial, mostly", False)  # kept raw, never a pass
    assert by_id["r0#0"][1] == "error" and "503" in by_id["r0#0"][2]
    # what the server received: one user message, the seed's template, this passage and this claim only
    citation_requests = [b for b in server.requests if "PASSAGE:\nPassage " not in b["messages"][0]["content"]]
    assert len(citation_requests) >= 3
    for body in server.requests:
        assert body["temperature"] == 0 and body["max_tokens"] == 5 and body["model"] == "judge-test"
        [message] = body["messages"]
        assert message["role"] == "user"
    for body in citation_requests:
        content = body["messages"][0]["content"]
        claim = content.split("CLAIM:\n", 1)[1].split("\n\nDoes the PASSAGE", 1)[0]
        # the passage is one chunk body as it stood in the prompt (the cited one, or a best-evidence candidate)
        assert any(content == render_prompt(body, claim) for body in bodies)
        assert "Question" not in content and "kb-4#c1" not in content


def test_second_run_makes_no_call_except_for_errors(after_first_night):
    warehouse, landing, config, server = after_first_night
    assert run_range(PLAN, landing=landing, warehouse=warehouse, config_file=config).success
    retried = server.requests  # the second night's calls: this server answered none of the first night's
    assert len(retried) == 2  # only the error pair, once plus one retry
    assert all("A flaky claim." in r["messages"][0]["content"] for r in retried)
    with connect(warehouse, read_only=True) as con:
        assert (
            con.sql("select count(*) from support_verdicts where cache_hit").fetchall()[0][0]
            >= 2 * len(PROFILE_ENCODINGS) - 2
        )
        assert con.sql("select count(*) from judge_cache where verdict = 'error'").fetchall() == [(0,)]
        [(cost,)] = con.sql("select sum(cost_usd) from support_verdicts where not cache_hit or cache_hit").fetchall()
        assert cost > 0


def test_calibration_through_the_same_server_and_cache(after_first_night):
    warehouse, landing, config, server = after_first_night
    result = run_calibration(warehouse=warehouse, config_file=config, labels=None)
    assert result.success
    with connect(warehouse, read_only=True) as con:
        rows = {
            r[0]: r[1:]
            for r in con.sql("select scope, negatives, false_passes, calibrated from judge_calibration").fetchall()
        }
        matrix = con.sql(
            "select human_label, judge_verdict, n from judge_calibration_confusion order by 1, 2"
        ).fetchall()
        status = con.sql("select surface, status from support_gate_status").fetchall()
    # label i has claim "Statement A|B|C" → judge "yes" for A (i % 3 == 0, all human "yes")
    assert matrix == [("no", "unparseable", 3), ("partial", "unparseable", 3), ("yes", "yes", 3)]
    assert rows["no_or_partial"] == (6, 0, False)  # no false pass, but 6 negatives are too few
    assert status == [("test-surface", "uncalibrated (reference labels only)")]  # a labels file without sample seeds
    calls = len(server.requests)
    assert run_calibration(warehouse=warehouse, config_file=config, labels=None).success
    assert len(server.requests) == calls  # cached


def test_api_key_never_in_the_warehouse_or_metadata(first_night):
    root, result, server = first_night
    warehouse = root / "w.duckdb"
    with connect(warehouse, read_only=True) as con:
        dump = json.dumps(con.sql("select * from support_verdicts").fetchall(), default=str)
    assert "sk-test-not-logged" not in dump
    for event in result.get_asset_materialization_events():
        assert "sk-test-not-logged" not in str(event.materialization.metadata)
    assert (
        server.request_headers[0].get("authorization", server.request_headers[0].get("Authorization"))
        == "Bearer sk-test-not-logged"
    )
