"""The review queue: every failing citation exactly once with its reason, the fields a reviewer needs,
and reviewer outcomes that round-trip through the append-only log into statuses and calibration."""

import json
from datetime import date

import polars as pl
import pytest

from citegate_assets.cli import main
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.review.best_evidence import decide_cause, top_candidates
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.pipeline import RunPlan, run_range

from .helpers import copy_run, run_once

PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 3))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The pipeline run once per module; each test gets its own copy of what it wrote (files only)."""
    root = tmp_path_factory.mktemp("queue-demo")
    generate_logs(root / "landing", days=2, requests_per_day=60, seed=5, truth_path=root / "truth.jsonl")
    run_once(root, PLAN)
    return root


@pytest.fixture
def demo(built, tmp_path, dagster_home, monkeypatch):
    copy_run(built, tmp_path)
    landing, warehouse = tmp_path / "landing", tmp_path / "w.duckdb"
    monkeypatch.setenv("CITEGATE_REVIEWS", str(tmp_path / "reviews"))
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("CITEGATE_REVIEWER", "tester")
    return warehouse, landing, tmp_path


def rows(warehouse, sql):
    with connect(warehouse, read_only=True) as con:
        return con.sql(sql).fetchall()


def test_every_failing_citation_is_queued_once_with_its_reason(demo):
    warehouse, _, tmp_path = demo
    truth = {
        t["citation_id"]: t["expected_reason"]
        for t in map(json.loads, (tmp_path / "truth.jsonl").read_text().splitlines())
        if "citation_id" in t
    }
    queued = dict(rows(warehouse, "select citation_id, reason from citation_queue"))
    assert len(queued) == rows(warehouse, "select count(*) from citation_queue")[0][0]  # once each
    for cid, reason in truth.items():
        if reason != "ok":
            assert queued.get(cid) == reason  # every provenance failure, with its reason
    expected_support = dict(
        rows(
            warehouse,
            """
            select r.citation_id,
                   case when v.verdict = 'unparseable' then 'judge_unparseable'
                        when v.verdict = 'no' then 'support_no'
                        when v.verdict = 'partial' then 'support_partial'
                        when not n.numeric_ok then 'numeric_mismatch'
                        when v.verdict = 'unjudged' then 'support_unjudged' end
            from provenance_results r
            join numeric_checks n using (citation_id)
            left join support_verdicts v using (citation_id)
            where r.reason = 'ok'
            """,
        )
    )
    for cid, reason in expected_support.items():
        assert queued.get(cid) == reason  # None for a passing citation: it is not in the queue
    assert any(r is None for r in expected_support.values())  # some citations pass both gates
    # the offline judge is the screen: what it leaves undecided is queued in its own group, never passed
    assert {"support_unjudged", "numeric_mismatch", "span_truncated"} <= set(queued.values())


def test_each_entry_carries_what_a_reviewer_needs(demo):
    warehouse, _, _ = demo
    per_reason = rows(
        warehouse,
        """
        select reason, count(*),
               count(*) filter (where claim is null or chunk_id is null or owner is null or prompt_sha256 is null
                                or source_file is null or source_line is null or status <> 'open'),
               count(*) filter (where passage is null), count(*) filter (where found_start is not null),
               count(*) filter (where support_verdict is not null and judge_raw_answer is null)
        from citation_queue group by reason
        """,
    )
    for reason, n, missing_core, no_passage, located, verdict_without_raw in per_reason:
        assert missing_core == 0, reason
        assert verdict_without_raw == 0, reason
        if reason == "fabricated_id":
            assert no_passage == n  # nothing to show: the chunk does not exist
        else:
            assert no_passage == 0, reason
        if reason in (
            "support_partial",
            "support_unjudged",
            "support_no",
            "numeric_mismatch",
            "span_in_other_chunk",
            "span_outside_context",
        ):
            assert located == n, reason  # the span's offsets in the prompt
    causes = dict(
        rows(
            warehouse,
            "select reason, list(distinct best_evidence_cause) from citation_queue "
            "where reason like 'support%' group by 1",
        )
    )
    assert all(None not in c or True for c in causes.values())
    owners = dict(rows(warehouse, "select reason, any_value(owner) from citation_queue group by 1"))
    assert owners["span_truncated"] == "rag-platform" and owners["support_unjudged"] == "content-quality"


def test_queue_cli_groups_with_counts(demo, capsys):
    warehouse, _, _ = demo
    assert main(["queue", "--limit", "1"]) == 0
    out = capsys.readouterr().out
    total = rows(warehouse, "select count(*) from citation_queue")[0][0]
    assert f"{total} queue entries" in out
    for reason, n in rows(warehouse, "select reason, count(*) from citation_queue group by 1"):
        assert f"== {reason}  ({n} {'entry' if n == 1 else 'entries'}, {n} open;" in out
    [(cid,)] = rows(
        warehouse, "select citation_id from citation_queue where reason = 'span_truncated' order by 1 limit 1"
    )
    assert main(["queue", "show", cid]) == 0
    shown = capsys.readouterr().out
    assert (
        "span_truncated" in shown
        and "the cited chunk's section" in shown
        and "of the chunk reached the prompt" in shown
    )


def test_review_round_trip_changes_status_and_feeds_calibration(demo, capsys):
    warehouse, landing, tmp_path = demo
    [(accepted,)] = rows(
        warehouse, "select citation_id from citation_queue where reason = 'support_unjudged' order by 1 limit 1"
    )
    [(escalated,)] = rows(
        warehouse, "select citation_id from citation_queue where reason = 'span_truncated' order by 1 limit 1"
    )
    assert main(["review", accepted, "repair", "--note", "first thought"]) == 0
    assert main(["review", accepted, "accept"]) == 0  # a later decision supersedes
    assert main(["review", escalated, "escalate", "--cause", "truncation"]) == 0
    assert run_range(PLAN, landing=landing, warehouse=warehouse, config_file=None).success
    status = dict(
        rows(
            warehouse,
            f"select citation_id, status from citation_queue where citation_id in ('{accepted}', '{escalated}')",
        )
    )
    assert status == {accepted: "accepted", escalated: "escalated"}
    assert rows(
        warehouse,
        f"select outcome, is_latest from review_outcomes where citation_id = '{accepted}' order by reviewed_at",
    ) == [
        ("repair", False),
        ("accept", True),
    ]
    [(label, labeller, claim_matches)] = rows(
        warehouse,
        f"""select h.label, h.labeller, h.claim = q.claim
            from hand_labels h join review_outcomes o on h.label_id = 'review:' || o.review_id
            join citation_queue q on q.citation_id = o.citation_id where o.citation_id = '{accepted}'""",
    )
    assert (label, labeller, claim_matches) == ("yes", "tester", True)
    assert rows(
        warehouse,
        "select cause, entries from (select cause, count(*) as entries from review_outcomes "
        "where is_latest and outcome = 'escalate' group by 1)",
    ) == [("truncation", 1)]
    # re-materializing keeps every entry once and its status
    before = rows(
        warehouse,
        "select count(*), count(distinct citation_id), count(*) filter (where status <> 'open') from citation_queue",
    )
    assert run_range(PLAN, landing=landing, warehouse=warehouse, config_file=None).success
    assert (
        rows(
            warehouse,
            "select count(*), count(distinct citation_id), count(*) filter (where status <> 'open') "
            "from citation_queue",
        )
        == before
    )


@pytest.mark.parametrize(
    "argv,message",
    [
        (["review", "nope#0", "accept"], "no queue entry"),
        (["review", "{cid}", "approve"], "unknown outcome"),
        (["review", "{cid}", "escalate"], "escalate needs --cause"),
        (["review", "{cid}", "escalate", "--cause", "weather"], "cause"),
        (["review", "{cid}", "accept", "--cause", "ranking"], "accept takes no --cause"),
    ],
)
def test_invalid_review_commands_write_nothing(demo, capsys, argv, message):
    warehouse, _, tmp_path = demo
    [(cid,)] = rows(warehouse, "select citation_id from citation_queue order by 1 limit 1")
    assert main([a.format(cid=cid) for a in argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "reviews").exists()


def test_best_evidence_causes():
    better = [{"chunk_id": "b", "verdict": "yes", "numeric_ok": True, "coverage": 0.9}]
    assert decide_cause("no", True, better, True) == ("ranking_or_chunking", "b", "yes")
    assert decide_cause("partial", True, [], True) == ("generation", None, None)
    assert decide_cause("yes", False, [], True) == ("generation", None, None)  # numbers overreached
    assert decide_cause(
        "no", True, [{"chunk_id": "c", "verdict": "partial", "numeric_ok": True, "coverage": 0.5}], True
    ) == ("ranking_or_chunking", "c", "partial")
    assert decide_cause(
        "no", True, [{"chunk_id": "c", "verdict": "no", "numeric_ok": True, "coverage": 0.5}], True
    ) == ("no_evidence", None, None)
    assert decide_cause("no", True, better, False) == (None, None, None)  # stakes off: not judged
    # a "yes" elsewhere whose numbers do not match is not better evidence
    assert (
        decide_cause("no", True, [{"chunk_id": "b", "verdict": "yes", "numeric_ok": False, "coverage": 0.9}], True)[0]
        == "ranking_or_chunking"
    )


@pytest.mark.parametrize("unknown", ["unjudged", "error"])
def test_best_evidence_never_rests_a_cause_on_a_passage_no_judge_decided(unknown):
    def cand(chunk: str, verdict: str, numeric_ok: bool = True) -> dict:
        return {"chunk_id": chunk, "verdict": verdict, "numeric_ok": numeric_ok, "coverage": 0.5}

    # a candidate no judge decided could be the full support: neither generation nor no_evidence
    assert decide_cause("partial", True, [cand("c", unknown)], True) == ("unknown", None, None)
    assert decide_cause("no", True, [cand("c", "no"), cand("d", unknown)], True) == ("unknown", None, None)
    # the cited passage undecided: it could be the partial support that makes it generation
    assert decide_cause(unknown, False, [cand("c", "no")], True) == ("unknown", None, None)
    assert decide_cause(unknown, False, [cand("c", "partial")], True) == ("unknown", None, None)
    # what is known still decides: another passage the judge fully passed, a partial one beside an undecided one
    assert decide_cause(unknown, False, [cand("c", "yes")], True) == ("ranking_or_chunking", "c", "yes")
    assert decide_cause("no", True, [cand("c", "partial"), cand("d", unknown)], True)[0] == "ranking_or_chunking"
    assert decide_cause(unknown, False, [], False) == (None, None, None)


def test_top_candidates_rank_by_claim_coverage():
    cands = pl.DataFrame(
        {
            "citation_id": ["x"] * 3,
            "chunk_id": ["a", "b", "c"],
            "claim": ["refunds take five days"] * 3,
            "passage": ["nothing here", "Refunds take five business days.", "refunds are quick"],
        }
    )
    top = top_candidates(cands, 2)
    assert top["chunk_id"].to_list() == ["b", "c"]
    assert top["coverage"].to_list()[0] == pytest.approx(1.0)


def test_another_passage_supporting_the_claim_is_found(tmp_path, landing, dagster_home, monkeypatch):
    """The model cited chunk A for a claim that chunk B states verbatim: ranking_or_chunking, better = B."""
    from .helpers import scenario_record, write_jsonl

    record = scenario_record("plain-list", "text")
    record["citations"] = [
        {
            "chunk_id": "kb-1#c1",
            "span": "The Pro plan costs $49 per month.",
            "claim": "Support is available 24/7 for Enterprise customers and partners.",
        }
    ]
    write_jsonl(landing / "a.jsonl", [record])
    config = tmp_path / "c.toml"
    config.write_text("[surfaces.default]\nstakes = 'high'\n")
    warehouse = tmp_path / "w.duckdb"
    assert run_range(
        RunPlan(date(2026, 11, 2), date(2026, 11, 2)), landing=landing, warehouse=warehouse, config_file=config
    ).success
    assert rows(warehouse, "select reason, best_evidence_cause, better_chunk_id from citation_queue") == [
        ("support_no", "ranking_or_chunking", "kb-2#c1")
    ]


def test_review_records_the_id_exactly_as_typed(tmp_path, landing, dagster_home, monkeypatch, capsys):
    """Request ids may hold spaces: " r1#2" and "r1#2" are two citations, and a review lands on the one typed."""
    from citegate_assets.lib.review.reviews import read_reviews

    from .helpers import scenario_record, write_jsonl

    warehouse, reviews = tmp_path / "w.duckdb", tmp_path / "reviews"
    monkeypatch.setenv("CITEGATE_WAREHOUSE", str(warehouse))
    monkeypatch.setenv("CITEGATE_REVIEWS", str(reviews))
    monkeypatch.setenv("CITEGATE_REVIEWER", "tester")
    records = [scenario_record("plain-list", "text", request_id=rid) for rid in ("r1", " r1")]
    write_jsonl(landing / "a.jsonl", records)
    plan = RunPlan(date(2026, 11, 2), date(2026, 11, 2))
    assert run_range(plan, landing=landing, warehouse=warehouse, config_file=None).success
    assert {"r1#2", " r1#2"} <= {c for (c,) in rows(warehouse, "select citation_id from citation_queue")}

    def logged() -> list[str]:
        return [line.review.citation_id for line in read_reviews(reviews)]

    assert main(["review", " r1#2", "accept"]) == 0
    assert "on ' r1#2' by tester" in capsys.readouterr().out
    assert logged() == [" r1#2"]  # not "r1#2", another request's citation
    assert main(["review", "r1#2", "repair"]) == 0
    assert logged() == [" r1#2", "r1#2"]
    # an id found only once its blanks are dropped: refused, the stored ids only as a hint, nothing written
    assert main(["review", "r1#2 ", "escalate", "--cause", "other"]) == 2
    err = capsys.readouterr().err
    assert "no queue entry 'r1#2 '" in err and "did you mean ' r1#2' or 'r1#2'?" in err and "nothing was written" in err
    assert logged() == [" r1#2", "r1#2"]
    assert main(["queue", "show", "r1#2 "]) == 2
    assert "did you mean ' r1#2' or 'r1#2'?" in capsys.readouterr().err
    assert main(["queue", "show", " r1#2"]) == 0
    assert "request ' r1'" in capsys.readouterr().out
    # the next run gives each its own status
    assert run_range(plan, landing=landing, warehouse=warehouse, config_file=None).success
    assert dict(
        rows(warehouse, "select citation_id, status from citation_queue where citation_id in ('r1#2', ' r1#2')")
    ) == {
        " r1#2": "accepted",
        "r1#2": "repaired",
    }
