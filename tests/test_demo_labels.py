"""The demo's calibration labels are drawn from its own generated logs (lib/loggen/demo_labels.py): every row
matches the generator's truth (an `ok` citation, its claim kind mapped to yes/no), carries the claim the log
holds and the cited chunk's text, and, after a real demo run, is the very passage and claim the warehouse
holds for that citation (what the judge is given)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from citegate_assets.cli import main
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.loggen.demo_labels import LABEL_OF_KIND, LABELLER
from citegate_assets.lib.report_view import rate_cell
from citegate_assets.lib.reporting import screen_held_out
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.lib.support.judge.screen import HELD_OUT, SCREEN_MODEL

SEED = 5


def read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            try:
                rows.append(json.loads(line))
            except ValueError:  # a planted malformed line
                continue
    return rows


def logged_citations(landing: Path) -> dict[str, tuple[str | None, str | None]]:
    """citation_id -> (claim, cited chunk's text), read back from the log files as ingest would see them."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for path in sorted(landing.iterdir()):
        for record in read_jsonl(path):
            if not isinstance(record, dict) or not isinstance(record.get("retrieved"), list):
                continue
            citations = record.get("citations")
            if isinstance(citations, str):
                try:
                    citations = json.loads(citations)
                except ValueError:  # a planted unparseable citations field
                    continue
            texts = {c.get("chunk_id"): c.get("text") for c in record["retrieved"] if isinstance(c, dict)}
            for pos, cite in enumerate(citations or []):
                out.setdefault(
                    f"{record.get('request_id')}#{pos}", (cite.get("claim"), texts.get(cite.get("chunk_id")))
                )
    return out


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo-labels")
    summary = generate_logs(
        root / "landing",
        days=3,
        requests_per_day=150,
        seed=SEED,
        truth_path=root / "truth.jsonl",
        labels_path=root / "labels.jsonl",
    )
    return root, summary


def test_every_label_matches_the_generators_truth(generated):
    root, summary = generated
    labels = read_jsonl(root / "labels.jsonl")
    truth = {t["citation_id"]: t for t in read_jsonl(root / "truth.jsonl") if "citation_id" in t}
    logged = logged_citations(root / "landing")
    assert len(labels) == 300 and summary["labels"] == {"yes": 150, "no": 150}
    assert len({r["id"] for r in labels}) == 300
    for row in labels:
        fact = truth[row["citation_id"]]
        assert fact["expected_reason"] == "ok"  # only citations that reach the judge
        assert row["claim_kind"] == fact["claim_kind"] and row["surface"] == fact["surface"]
        assert row["label"] == ("yes" if fact["claim_kind"] == "faithful" else "no")
        assert (row["claim"], row["passage"]) == logged[row["citation_id"]]
        assert row["labeller"] == LABELLER and row["id"] == f"demo-{row['citation_id']}"
    # both sides, every unfaithful kind, and several surfaces
    assert Counter(r["claim_kind"] for r in labels).keys() == LABEL_OF_KIND.keys()
    assert len({r["surface"] for r in labels}) >= 4
    # the faithful ones are a sample of the faithful `ok` citations, not of every one
    ok = [t for t in truth.values() if t["expected_reason"] == "ok"]
    assert sum(t["claim_kind"] == "faithful" for t in ok) > 150 and sum(t["claim_kind"] != "faithful" for t in ok) > 150


def test_the_labels_are_deterministic_per_seed(generated, tmp_path):
    root, _ = generated
    generate_logs(tmp_path / "l", days=3, requests_per_day=150, seed=SEED, labels_path=tmp_path / "labels.jsonl")
    assert (tmp_path / "labels.jsonl").read_bytes() == (root / "labels.jsonl").read_bytes()
    generate_logs(tmp_path / "l2", days=3, requests_per_day=150, seed=SEED + 1, labels_path=tmp_path / "other.jsonl")
    assert (tmp_path / "other.jsonl").read_bytes() != (root / "labels.jsonl").read_bytes()


def test_a_short_side_is_filled_from_the_other(tmp_path):
    summary = generate_logs(tmp_path / "l", days=1, requests_per_day=30, seed=SEED, labels_path=tmp_path / "x.jsonl")
    rows = read_jsonl(tmp_path / "x.jsonl")
    ok = summary["expected_reasons"]["ok"]
    assert len(rows) == min(300, ok) and summary["labels"]["yes"] + summary["labels"]["no"] == len(rows)


def test_the_labels_file_may_not_be_inside_the_logs_folder(tmp_path):
    with pytest.raises(ValueError, match="labels_path .* is inside out_dir"):
        generate_logs(tmp_path / "l", days=1, requests_per_day=5, labels_path=tmp_path / "l" / "labels.jsonl")


def test_the_demo_calibrates_on_its_own_logs(tmp_path, monkeypatch, capsys, dagster_home):
    """A real demo run: hand_labels holds the generated labels, each the passage and claim the warehouse holds for
    that citation (normalized as for the judge), and calibration reports the judge's false fails on them."""
    monkeypatch.chdir(tmp_path)
    for name in ("CITEGATE_CONFIG", "CITEGATE_WAREHOUSE", "CITEGATE_LOGS", "CITEGATE_LABELS", "CITEGATE_PUBLISHED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CITEGATE_JUDGE_BASE_URL", raising=False)
    assert main(["demo", "--days", "2", "--requests-per-day", "120", "--seed", str(SEED)]) == 0
    out = capsys.readouterr().out
    labels_file = tmp_path / "data" / "demo-labels.jsonl"
    labels = read_jsonl(labels_file)
    assert f"labels:       {labels_file}  (the demo's labels, drawn from its generated logs' truth)" in out
    yes = sum(r["label"] == "yes" for r in labels)
    assert f"calibration labels: {yes} faithful (yes) and {len(labels) - yes} unfaithful (no)" in out
    published = tmp_path / "data" / "warehouse.published.duckdb"
    with connect(published, read_only=True) as con:
        held = {
            label_id: (label, claim, passage)
            for label_id, label, claim, passage in con.sql(
                "select label_id, label, claim_normalized, passage_normalized from hand_labels"
            ).fetchall()
        }
        judged = dict(
            (f"demo-{cid}", (claim, passage))
            for cid, claim, passage in con.sql(
                """
                select r.citation_id, c.claim_normalized,
                       substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start)
                from provenance_results r
                join citations c using (citation_id)
                join prompts p on p.request_id = r.request_id
                join prompt_sections s on s.request_id = r.request_id and s.chunk_id = r.chunk_id
                 and r.found_start >= s.body_start and r.found_end <= s.body_end
                where r.reason = 'ok'
                qualify row_number() over (partition by r.citation_id order by s.section_no) = 1
                """
            ).fetchall()
        )
        [(positives, false_fails, tier)] = con.sql(
            "select positives, false_fails, tier from judge_calibration "
            "where judge_model = 'citegate-screen-v1' and scope = 'no'"
        ).fetchall()
    assert set(held) == {f"demo-{r['citation_id']}" for r in labels}
    for row in labels:
        label, claim, passage = held[row["id"]]
        assert label == row["label"] and (claim, passage) == judged[row["id"]]  # what the judge is given
    assert positives == yes and 0 <= false_fails <= positives and tier == "screen"
    # which judge ran, its held-out figures (from the one place that holds them), the labels the status rests on,
    # and how to connect a judge
    assert "Judge: citegate-screen-v1 alone (no LLM judge configured: what it leaves undecided is unjudged)" in out
    for h in HELD_OUT:
        assert (
            f"    {h.split} ({h.pairs:,} pairs): false pass {rate_cell(*h.false_pass)} (yes on human no or partial), "
            f"recall {rate_cell(*h.recall)} (yes on human yes)"
        ) in out
    [line] = [ln for ln in out.splitlines() if ln.startswith("Support gate: judge ")]
    assert line.startswith(
        f"Support gate: judge citegate-screen-v1 (offline: no judge endpoint; {screen_held_out([SCREEN_MODEL])[0]}); "
    )
    # the generator's labels are reference labels: no surface's status rests on anything else
    assert "uncalibrated (reference labels only): " in line and "own labels" not in line
    assert (
        f"    reference: {labels_file.name}, labeller citegate-loggen-truth: {len(labels)} ({yes} yes, 0 partial"
    ) in out
    assert "CITEGATE_JUDGE_BASE_URL=http://127.0.0.1:11434/v1" in out and 'mode = "cascade"' in out
