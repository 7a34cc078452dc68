"""[judge.secondary]: a candidate judge on a stable hash sample of the primary's judged pairs, and the agreement
(Cohen's kappa, the confusion table). Two real OpenAI-compatible servers on 127.0.0.1, the real openai client;
the secondary never changes a primary verdict, the queue or a metric."""

from datetime import date

import duckdb
import pytest

from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.lib.support.agreement import SALT, agreement, agreement_key, cohen_kappa, confusion_rows
from citegate_assets.lib.support.judge.base import VERDICTS
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import PROFILE_ENCODINGS, scenario_record, write_jsonl
from .judge_server import Reply, ScriptedJudgeServer

# -- the pure functions -------------------------------------------------------------------------------------------

# primary (rows) x secondary (columns), yes / partial / no; by hand: n = 60, p_o = 45/60,
# row sums 25, 15, 20, column sums 24, 19, 17, p_e = (25*24 + 15*19 + 20*17) / 3600 = 1225/3600,
# kappa = (2700 - 1225) / (3600 - 1225) = 1475/2375 = 59/95
HAND = {
    ("yes", "yes"): 20, ("yes", "partial"): 5, ("yes", "no"): 0,
    ("partial", "yes"): 3, ("partial", "partial"): 10, ("partial", "no"): 2,
    ("no", "yes"): 1, ("no", "partial"): 4, ("no", "no"): 15,
}  # fmt: skip


def test_kappa_matches_the_hand_computed_example():
    assert cohen_kappa(HAND) == pytest.approx(59 / 95)
    pairs = [pair for pair, n in HAND.items() for _ in range(n)]
    result = agreement(pairs + [("yes", "error"), ("no", "unparseable")])
    assert result.confusion == HAND and result.compared == 60 and result.agreed == 45
    assert result.secondary_failures == 2  # counted apart: in neither the table nor kappa
    assert result.kappa == pytest.approx(59 / 95) and result.observed == pytest.approx(0.75)
    assert confusion_rows(result)[1] == {"primary \\ secondary": "partial", "yes": 3, "partial": 10, "no": 2}


def test_kappa_edge_cases():
    assert cohen_kappa({}) is None  # nothing compared
    assert cohen_kappa({("yes", "yes"): 7}) is None  # p_e = 1: undefined, not 1
    assert cohen_kappa({("yes", "yes"): 5, ("no", "no"): 5}) == pytest.approx(1.0)
    assert cohen_kappa({("yes", "no"): 5, ("no", "yes"): 5}) == pytest.approx(-1.0)
    assert agreement([("yes", "error")]).kappa is None


def test_the_python_sample_key_is_the_sql_one():
    ids = [f"r{i}#{j}" for i in range(50) for j in range(3)]
    con = duckdb.connect()
    sql = "select ('0x' || left(sha256($salt || $id), 13))::ubigint / 4503599627370496.0"
    for cid in ids:
        [(key,)] = con.execute(sql, {"salt": SALT, "id": cid}).fetchall()
        assert key == agreement_key(cid)


# -- end to end: two judge servers --------------------------------------------------------------------------------

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 2))
RATE = 0.5


def _claim(request: dict) -> str:
    content = request["messages"][0]["content"]
    return content.split("CLAIM:\n", 1)[1].split("\n\nDoes the PASSAGE", 1)[0]


def _number(claim: str) -> int:
    return int(claim.removeprefix("Statement ").removesuffix("."))


def _primary(request: dict, index: int) -> Reply:
    claim = _claim(request)
    if not claim.startswith("Statement "):
        return Reply("no")
    return Reply(VERDICTS[_number(claim) % 3])


FAILING = set(range(0, 100, 7))  # the secondary answers 503 for these claims: an error, never agreement


def _secondary(request: dict, index: int) -> Reply:
    n = _number(_claim(request))
    if n in FAILING:
        return Reply(status=503)
    return Reply(VERDICTS[(n // 2) % 3].capitalize() + ".")  # agrees on some, not all


def _expected_secondary(n: int) -> str:
    return "error" if n in FAILING else VERDICTS[(n // 2) % 3]


def _records():
    records = [
        scenario_record(t, e, request_id=f"r{i}", logged_at="2026-11-02T10:00:00Z")
        for i, (t, e) in enumerate(PROFILE_ENCODINGS)
    ]
    n = 0
    for r in records:
        for c in r["citations"]:
            c["claim"] = f"Statement {n}."
            n += 1
    return records


CONFIG = (
    "[surfaces.default]\nstakes = 'high'\ntemplate = 'plain-list'\n"
    "[judge]\nmax_retries = 1\nbackoff_base_s = 0.01\ntimeout_s = 5\nbreaker_threshold = 50\n"
    "[judge.prices.judge-test]\ninput = 1.0\noutput = 2.0\n"
)


@pytest.fixture
def servers(monkeypatch, dagster_home):
    primary = ScriptedJudgeServer(_primary).start()
    secondary = ScriptedJudgeServer(_secondary).start()
    monkeypatch.setenv("CITEGATE_JUDGE_BASE_URL", primary.base_url)
    monkeypatch.setenv("CITEGATE_JUDGE_MODEL", "judge-test")
    monkeypatch.setenv("CITEGATE_JUDGE_API_KEY", "sk-primary")
    monkeypatch.setenv("CANDIDATE_KEY", "sk-candidate")
    yield primary, secondary
    primary.stop()
    secondary.stop()


def _run(tmp_path, name: str, config_text: str):
    root = tmp_path / name
    landing = root / "landing"
    landing.mkdir(parents=True)
    write_jsonl(landing / "a.jsonl", _records())
    config = root / "citegate.toml"
    config.write_text(config_text)
    warehouse = root / "w.duckdb"
    result = run_range(PLAN, landing=landing, warehouse=warehouse, config_file=config)
    assert result.success
    return warehouse, result


def _snapshot(warehouse):
    with connect(warehouse, read_only=True) as con:
        verdicts = con.sql(
            "select citation_id, judge_model, verdict, raw_answer, support_pass from support_verdicts order by 1"
        ).fetchall()
        queue = con.sql("select * exclude (queued_at) from citation_queue order by all").fetchall()
        metrics = con.sql(
            "select week_start, surface, metric, numerator, denominator, value from weekly_surface_metrics order by all"
        ).fetchall()
    return verdicts, queue, metrics


def test_secondary_judge_sees_only_the_sample_and_never_changes_the_gate(tmp_path, servers):
    primary, secondary = servers
    plain, plain_result = _run(tmp_path, "plain", CONFIG)
    primary_calls_without = sorted(_claim(r) for r in primary.requests)
    assert secondary.requests == []
    [meta_off] = [m.metadata for m in plain_result.asset_materializations_for_node("judge_agreement")]
    assert "not configured" in meta_off["secondary_judge"].value
    with connect(plain, read_only=True) as con:
        assert con.sql("select count(*) from judge_agreement").fetchall() == [(0,)]

    del primary.requests[:]
    config = CONFIG + (
        f"[judge.secondary]\nbase_url = '{secondary.base_url}'\nmodel = 'candidate-1'\n"
        f"api_key_env = 'CANDIDATE_KEY'\nsample_rate = {RATE}\n"
    )
    compared, result = _run(tmp_path, "compared", config)

    # the primary: the same calls, the same verdicts, queue and metrics as without a secondary
    assert sorted(_claim(r) for r in primary.requests) == primary_calls_without
    assert _snapshot(compared) == _snapshot(plain)
    verdicts = {cid: verdict for cid, _, verdict, _, _ in _snapshot(plain)[0]}
    assert len(verdicts) == 2 * len(PROFILE_ENCODINGS) and all(_snapshot(plain))  # verdicts, a queue, metrics
    with connect(compared, read_only=True) as con:
        claims = dict(con.sql("select citation_id, claim_normalized from citations").fetchall())
        rows = con.sql(
            "select citation_id, day, surface, primary_model, primary_verdict, secondary_model, secondary_verdict, "
            "cache_hit from judge_agreement order by citation_id"
        ).fetchall()
        assert con.sql("select count(*) from judge_cache where judge_model = 'candidate-1'").fetchall()[0][0] > 0

    # the sample, computed here: the primary's yes / partial / no pairs whose key is under the rate
    sampled = sorted(c for c, v in verdicts.items() if v in VERDICTS and agreement_key(c) < RATE)
    assert 0 < len(sampled) < len(verdicts)
    # what the secondary received: exactly the sampled pairs (an error pair twice: one retry), its model, its key
    received = [_claim(r) for r in secondary.requests]
    failing = {claims[c] for c in sampled if _number(claims[c]) in FAILING}
    assert sorted(set(received)) == sorted(claims[c] for c in sampled)
    assert len(received) == len(sampled) + len(failing)
    assert all(r["model"] == "candidate-1" for r in secondary.requests)
    assert {h["authorization"] for h in secondary.request_headers} == {"Bearer sk-candidate"}
    assert failing  # the sample holds at least one secondary error

    expected = [
        (
            c,
            date(2026, 11, 2),
            "test-surface",
            "judge-test",
            verdicts[c],
            "candidate-1",
            _expected_secondary(_number(claims[c])),
            False,
        )
        for c in sampled
    ]
    assert rows == expected

    # kappa by hand from the expected pairs, errors left out
    pairs = [(p, s) for *_, p, _, s, _ in expected if s != "error"]
    n = len(pairs)
    p_o = sum(p == s for p, s in pairs) / n
    p_e = sum((sum(p == v for p, _ in pairs) / n) * (sum(s == v for _, s in pairs) / n) for v in VERDICTS)
    kappa = (p_o - p_e) / (1 - p_e)
    [meta] = [m.metadata for m in result.asset_materializations_for_node("judge_agreement")]
    assert meta["cohen_kappa"].value == pytest.approx(kappa)
    assert meta["compared_pairs"].value == n and meta["sampled_pairs"].value == len(sampled)
    assert meta["secondary_errors"].value == len(failing) == meta["secondary_failures"].value
    assert meta["secondary_model"].value == "candidate-1" and meta["primary_model"].value == "judge-test"
    assert "primary \\ secondary" in meta["confusion"].value

    # a second run: the candidate's answers come from its own cache entries; only its errors are asked again
    before = len(secondary.requests)
    again = run_range(
        PLAN,
        landing=tmp_path / "compared" / "landing",
        warehouse=compared,
        config_file=tmp_path / "compared" / "citegate.toml",
    )
    assert again.success
    assert sorted(_claim(r) for r in secondary.requests[before:]) == sorted(2 * list(failing))
    with connect(compared, read_only=True) as con:
        hits = con.sql("select secondary_verdict <> 'error', cache_hit from judge_agreement").fetchall()
    assert len(hits) == len(sampled) and all(ok == hit for ok, hit in hits)
    assert _snapshot(compared) == _snapshot(plain)
