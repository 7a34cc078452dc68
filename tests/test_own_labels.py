"""Labels from the warehouse's own traffic: the own-label log (append-only, replayed with skip and undo), the seeded
stratified sample, the weights that carry its error rates back to the traffic's mix, the CLI twin `citegate label`
end to end into `citegate calibrate` and the nightly run (support_gate_status names the labels `own`), labels from
another warehouse or without a seed read as `reference`, and the demo's status resting on reference labels only."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from citegate_assets.lib.calibration.label_log import (
    LOG_NAME,
    LabelError,
    append_label,
    labeller_agreement,
    line_problem,
    make_line,
    pair_key,
    read_label_log,
    replay,
)
from citegate_assets.lib.calibration.labels import read_labels
from citegate_assets.lib.calibration.own_labels import draw_sample, line_for, strata_counts, weights
from citegate_assets.lib.calibration.rates import calibration_summary, gate_status, wilson_bounds
from citegate_assets.lib.loggen import generate_logs
from citegate_assets.lib.provenance.passages import cited_passages
from citegate_assets.lib.storage.warehouse import connect
from citegate_assets.lib.support.judge.screen import screen_verdict
from citegate_assets.pipeline import RunPlan, run_calibration, run_range

from .helpers import write_jsonl
from .judge_server import Reply, ScriptedJudgeServer

PROJECT = Path(__file__).resolve().parents[1]
PLAN = RunPlan(date(2026, 11, 2), date(2026, 11, 3))
PROMPT = "label [y/p/n/s/u/q]>"
# billing-assistant and legal-faq judged whole, help-center and partner-portal sampled, internal-search off: the
# strata hold every support verdict and `not_judged`
CONFIG = """
[surfaces.default]
stakes = "high"
[surfaces.help-center]
stakes = "low"
sample_rate = 0.3
[surfaces.partner-portal]
stakes = "low"
sample_rate = 0.3
[surfaces.internal-search]
stakes = "off"
"""
KIND_LABEL = {"faithful": "y", "overreach": "p", "numeric_mismatch": "n", "unrelated": "n"}
PLANTED = 12
PLANTS = ("QUESTION-PLANT", "ANSWER-PLANT", "OTHERCHUNK-PLANT")  # in the question, the answer, the other chunk
XSS_CLAIM = ' <script>window.__xss = "label"</script><img src=x onerror="window.__xss = 1">'


# ---------------------------------------------------------------------------------------------------- builders


def planted_records() -> list[dict]:
    """Requests whose question, answer and other chunk carry distinctive strings no label page may show; each cites
    its first chunk faithfully, and request dup-1 repeats plant-0's passage and claim (one pair, two citations)."""
    records = []
    for i in range(PLANTED):
        passage = f"Plant {i}: the Vellum widget ships within {i + 3} business days of the order."
        other = f"OTHERCHUNK-PLANT-{i}: returns are free for {i + 10} days."
        records.append(
            {
                "request_id": f"plant-{i}",
                "logged_at": f"2026-11-02T0{i % 10}:00:00Z",
                "surface": "planted",
                "answer_model": "gpt-test",
                "prompt": f"Answer using only the context.\n\nContext:\n[pl-{i}#a] {passage}\n[pl-{i}#b] {other}\n\n"
                f"Question: QUESTION-PLANT-{i} how fast does it ship?\nAnswer:",
                "retrieved": [
                    {"chunk_id": f"pl-{i}#a", "rank": 1, "text": passage},
                    {"chunk_id": f"pl-{i}#b", "rank": 2, "text": other},
                ],
                "answer": f"ANSWER-PLANT-{i}: it ships within {i + 3} business days.",
                "citations": [
                    {
                        "chunk_id": f"pl-{i}#a",
                        "span": f"ships within {i + 3} business days",
                        "claim": f"The Vellum widget ships within {i + 3} business days.",
                    }
                ],
            }
        )
    records[1]["citations"][0]["claim"] += XSS_CLAIM  # shown as text on the label page, never run
    dup = json.loads(json.dumps(records[0]))
    dup["request_id"], dup["logged_at"] = "dup-1", "2026-11-03T05:00:00Z"
    dup["prompt"] = dup["prompt"].replace("QUESTION-PLANT-0", "QUESTION-PLANT-dup")
    records.append(dup)
    return records


def build(root: Path, config: str = CONFIG) -> None:
    """Two generated days plus the planted requests, one real nightly run (its own Dagster home) into root/w.duckdb."""
    generate_logs(root / "landing", days=2, requests_per_day=60, seed=5, truth_path=root / "truth.jsonl")
    write_jsonl(root / "landing" / "planted.jsonl", planted_records())
    (root / "citegate.toml").write_text(config)
    home = root / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        mp.setenv("CITEGATE_REVIEWS", str(root / "reviews"))
        assert run_range(
            PLAN, landing=root / "landing", warehouse=root / "w.duckdb", config_file=root / "citegate.toml"
        )


def truth_labels(root: Path) -> dict[str, str]:
    """citation_id -> the key a careful labeller presses (the generator's truth; every planted claim is faithful)."""
    kinds = {}
    for line in (root / "truth.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("claim_kind"):
            kinds[row["citation_id"]] = KIND_LABEL[row["claim_kind"]]
    return kinds


def keys_by_pair(root: Path, seed: int = 1, size: int = 100) -> dict[tuple[str, str], str]:
    """(passage, claim) -> the truth's key, for the pairs of the sample (what the test knows, not the page)."""
    kinds = truth_labels(root)
    with connect(root / "w.published.duckdb", read_only=True) as con:
        sample = draw_sample(con, seed, size)
    return {(p.passage, p.claim): kinds.get(p.citation_id, "y") for p in sample.pairs}


def label_with_cli(
    root: Path, labeller: str, decide: Callable[[str, str, int], str], presses: int, *args: str
) -> list[str]:
    """`citegate label` in a subprocess, answered key by key as a person at the terminal would: decide(passage, claim,
    press number) -> key; after `presses` keys, q. Returns the transcript."""
    command = [sys.executable, "-m", "citegate_assets.cli", "label", "--warehouse", str(root / "w.duckdb")]
    command += ["--config", str(root / "citegate.toml"), "--labeller", labeller, *args]
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=root
    )
    watchdog = threading.Timer(240, process.kill)
    watchdog.start()
    transcript: list[str] = []
    shown: dict[str, str] = {}
    expect = None
    pressed = 0
    try:
        assert process.stdout is not None and process.stdin is not None
        for line in process.stdout:
            transcript.append(line)
            text = line.rstrip("\n")
            if expect is not None:
                shown[expect], expect = text, None
            elif text in ("PASSAGE:", "CLAIM:"):
                expect = text[:-1].lower()
            elif text.startswith(PROMPT):
                key = decide(shown["passage"], shown["claim"], pressed) if pressed < presses else "q"
                process.stdin.write(key + "\n")
                process.stdin.flush()
                pressed += 1
        assert process.wait(timeout=30) == 0, "".join(transcript)
    finally:
        watchdog.cancel()
    return transcript


def rows(path: Path, sql: str, params: dict | None = None) -> list[tuple]:
    with connect(path, read_only=True) as con:
        return con.execute(sql, params or {}).fetchall()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("own-labels")
    build(root)
    return root


@pytest.fixture
def site(built, tmp_path):
    """The test's own copy of the built warehouse (its labels written there)."""
    for path in built.iterdir():
        if path.name == "dagster_home":
            continue
        (shutil.copytree if path.is_dir() else shutil.copy2)(path, tmp_path / path.name)
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return tmp_path


def own_line(label: str, passage: str = "P.", claim: str = "C.", labeller: str = "ann", **extra) -> dict:
    fields = dict(
        label=label,
        labeller=labeller,
        pair_key=pair_key(passage, claim),
        citation_id="r1#0",
        stratum_surface="s",
        stratum_verdict="yes",
        sample_seed=1,
        sample_size=100,
        claim=claim,
        passage=passage,
    )
    return {**fields, **extra}


# ---------------------------------------------------------------------------------------------------- the log


def test_a_label_line_must_hash_to_its_pair_and_skip_and_undo_carry_no_text(tmp_path):
    line = make_line(**own_line("yes", "Refunds take 5 days.", "Refunds take five days."))
    assert line.pair_key == pair_key("Refunds take 5 days.", "Refunds take five days.")
    skip = make_line(**own_line("skip"))
    assert (skip.claim, skip.passage) == (None, None)  # a skip holds no user text
    record = json.loads(line.to_json())
    record["claim"] = "Refunds take six days."  # edited after labelling
    assert line_problem(record) == (
        "pair_key_mismatch",
        "the claim and passage do not hash to pair_key (edited after labelling?)",
    )
    with pytest.raises(LabelError, match="label 'maybe' is not one of yes, partial, no, skip, undo"):
        make_line(**own_line("maybe"))
    with pytest.raises(LabelError, match="'labeller' is empty"):
        make_line(**own_line("yes", labeller="  "))
    # the log is append-only, 0600 in a 0700 folder; a labels path that is a file, or a log that is a link, is refused
    folder = tmp_path / "w.labels"
    path = append_label(folder, line)
    assert (os.stat(folder).st_mode & 0o777, os.stat(path).st_mode & 0o777) == (0o700, 0o600)
    assert path.read_bytes() == (line.to_json() + "\n").encode()
    (tmp_path / "file.jsonl").write_text("")
    with pytest.raises(LabelError, match="a file; own labels are appended to own-labels.jsonl in a labels folder"):
        append_label(tmp_path / "file.jsonl", line)
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / LOG_NAME).symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(LabelError, match="a symbolic link, not the own labels log file; nothing was written"):
        append_label(linked, line)
    assert not (tmp_path / "elsewhere.jsonl").exists()


def test_replay_the_last_word_stands_undo_takes_it_back_and_two_labellers_agree(tmp_path):
    folder = tmp_path / "labels"
    a, b, c = (("P1.", "C1."), ("P2.", "C2."), ("P3.", "C3."))
    for label, (passage, claim), who in [
        ("yes", a, "ann"),
        ("no", b, "ann"),
        ("undo", b, "ann"),  # takes back the no
        ("partial", b, "ann"),
        ("skip", c, "ann"),
        ("yes", a, "bob"),
        ("no", b, "bob"),
        ("no", a, "ann"),  # relabelled: the later word stands
    ]:
        append_label(folder, make_line(**own_line(label, passage, claim, labeller=who)))
    standing = replay(read_label_log(folder))
    assert {(w, line.label) for (w, _), line in standing.lines.items()} == {
        ("ann", "no"),
        ("ann", "partial"),
        ("ann", "skip"),
        ("bob", "yes"),
        ("bob", "no"),
    }
    last = standing.last_of("ann")
    assert last is not None and last.pair_key == pair_key(*a) and last.label == "no"
    assert sorted(line.label for line in standing.labels() if line.labeller == "ann") == ["no", "partial"]
    said = [(line.labeller, line.pair_key, line.label) for line in standing.labels()]
    [both] = labeller_agreement(said)
    assert (both.first, both.second, both.pairs, both.agreed) == ("ann", "bob", 2, 0)
    assert both.kappa == pytest.approx(-1 / 3)  # p_o 0, p_e 1/4 (both said no once): -1/4 / (3/4)


def test_the_labels_folder_replays_own_lines_beside_reference_labels_and_rejects_bad_ones(tmp_path):
    folder = tmp_path / "labels"
    folder.mkdir()
    write_jsonl(folder / "wice.jsonl", [{"id": "w1", "claim": "C.", "passage": "P.", "label": "no", "labeller": "x"}])
    good = make_line(**own_line("yes", "P9.", "C9."))
    edited = json.loads(make_line(**own_line("no", "P8.", "C8.")).to_json()) | {"claim": "C-edited."}
    stray_undo = make_line(**own_line("undo", "P7.", "C7."))
    bad_seed = json.loads(make_line(**own_line("yes", "P6.", "C6.")).to_json()) | {"sample_seed": "one"}
    lines = [good.to_json(), json.dumps(edited), stray_undo.to_json(), json.dumps(bad_seed)]
    (folder / LOG_NAME).write_text("\n".join(lines) + "\n")
    labels, rejects = read_labels(folder)
    assert labels.select("label_id", "label", "sample_seed", "stratum_surface", "pair_key").rows() == [
        ("w1", "no", None, None, None),
        (f"own:ann:{good.pair_key}", "yes", 1, "s", good.pair_key),
    ]
    assert rejects.select("source_file", "line_no", "reason").rows() == [
        (LOG_NAME, 2, "pair_key_mismatch"),
        (LOG_NAME, 4, "missing_field"),
        (LOG_NAME, 3, "nothing_to_undo"),
    ]
    assert "'sample_seed' must be a whole number, got str" in rejects["detail"][1]


# ---------------------------------------------------------------------------------------------------- the weights


def test_weighted_rates_carry_a_stratified_sample_back_to_the_traffic():
    """docs/support-gate.md's worked example: help-center's traffic is 900 citations the judge passed and 100 it did
    not; 50 pairs of each are labelled. Unweighted, 5 false passes of 45 negatives read 11%; weighted to the
    traffic, 53%."""
    rows_ = []
    for human, judge, n in [("yes", "yes", 45), ("no", "yes", 5), ("yes", "no", 10), ("no", "no", 40)]:
        rows_ += [(human, judge, "help-center", judge) for _ in range(n)]
    own = pl.DataFrame(
        rows_, schema=["human_label", "judge_verdict", "stratum_surface", "stratum_verdict"], orient="row"
    ).with_columns(pair_key=pl.format("p{}", pl.int_range(pl.len())))
    counts = pl.DataFrame({"surface": ["help-center"] * 2, "verdict": ["yes", "no"], "citations": [900, 100]})
    weighted = weights(own, counts)
    assert dict(weighted.group_by("stratum_verdict").agg(pl.col("weight").first()).rows()) == {"yes": 18.0, "no": 2.0}
    [main, _] = calibration_summary(weighted, 0.1, 30)
    assert (main["negatives"], main["false_passes"]) == (45, 5)
    assert main["false_pass_rate"] == pytest.approx(90 / 170)  # 5 x 18 of 5 x 18 + 40 x 2
    n_eff = 170**2 / (5 * 18**2 + 40 * 2**2)
    assert main["effective_negatives"] == pytest.approx(n_eff) == pytest.approx(16.236, abs=1e-3)
    assert (main["wilson_low"], main["wilson_high"]) == pytest.approx(wilson_bounds(90 / 170, n_eff))
    assert (main["wilson_low"], main["wilson_high"]) == pytest.approx((0.3054, 0.7422), abs=1e-4)
    assert main["false_fail_rate"] == pytest.approx(20 / 830)  # 10 x 2 of 45 x 18 + 10 x 2
    assert not main["calibrated"]
    unweighted = calibration_summary(own, 0.1, 30)[0]
    assert unweighted["false_pass_rate"] == pytest.approx(5 / 45)  # what the labels alone would have said
    # a pair labelled by two people stands once for its stratum: each label weighs half
    twice = pl.concat([own, own.head(1)])
    assert weights(twice, counts).filter(pl.col("pair_key") == "p0")["weight"].to_list() == [9.0, 9.0]


def test_a_gate_is_enforced_on_own_labels_only_pooled_when_a_surface_has_too_few():
    def summary(origin, surface, negatives, false_passes):
        pairs = pl.DataFrame(
            [("no", "yes")] * false_passes + [("no", "no")] * (negatives - false_passes) + [("yes", "yes")] * 20,
            schema=["human_label", "judge_verdict"],
            orient="row",
        )
        return [{**r, "label_origin": origin, "surface": surface} for r in calibration_summary(pairs, 0.1, 30)]

    reference = summary("reference", None, 500, 0)  # plenty of reference negatives, none passed
    [a, b, off] = gate_status([("a", "high"), ("b", "low"), ("c", "off")], reference, judge_offline=True)
    assert (a["status"], a["labels"], off["status"]) == ("uncalibrated (reference labels only)", "reference", "off")
    assert a["why"].startswith("reference labels only (own negatives 0 < 30): false pass upper bound 0.008 < 0.1")
    assert a["next_step"] == (
        "label about 60 more pairs (citegate label, or the review page's Label tab); connect a judge "
        '(CITEGATE_JUDGE_BASE_URL; README "Connect a real judge") to decide what the offline judge cannot'
    )
    own = summary("own", None, 45, 0) + summary("own", "a", 40, 0) + summary("own", "b", 5, 0)
    [a, b] = gate_status([("a", "high"), ("b", "high")], reference + own)
    assert (a["status"], a["labels"], a["pooled"], a["own_negatives"]) == ("enforced", "own", False, 40)
    assert (b["status"], b["labels"], b["pooled"], b["own_negatives"]) == ("enforced", "own", True, 5)
    assert b["why"].startswith("own labels pooled over surfaces (b has 5 own negatives < 30): false pass upper")
    assert a["next_step"] is None and b["next_step"] is None
    few = summary("own", None, 20, 0)  # 20 negatives of 40 own labels: 10 more negatives, about 20 more pairs
    [a] = gate_status([("a", "high")], reference + few)
    assert (a["status"], a["labels"]) == ("uncalibrated (reference labels only)", "reference")
    assert a["next_step"] == "label about 20 more pairs (citegate label, or the review page's Label tab)"


# ---------------------------------------------------------------------------------------------------- the sample


def test_the_sample_is_seeded_stratified_and_holds_each_pair_once(built):
    published = built / "w.published.duckdb"
    with connect(published, read_only=True) as con:
        first, again = draw_sample(con, 1, 8), draw_sample(con, 1, 8)
        other, larger = draw_sample(con, 2, 8), draw_sample(con, 1, 200)
        counts = {(s, v): n for s, v, n in strata_counts(con).iter_rows()}
    assert first.pairs == again.pairs and [p.pair_key for p in first.pairs] != [p.pair_key for p in other.pairs]
    assert len({p.pair_key for p in larger.pairs}) == len(larger.pairs)  # one pair, however many citations
    planted = [p for p in larger.pairs if p.surface == "planted"]
    # 13 citations, 12 pairs: every planted citation is in one of its surface's strata, whatever the judge said
    assert len(planted) == PLANTED and sum(n for (s, _), n in counts.items() if s == "planted") == PLANTED + 1
    # each surface takes its strata in turn: up to 8 pairs, no stratum more than one ahead of another unless it ran out
    for surface in first.surfaces():
        taken: dict[str, int] = {}
        for p in first.pairs:
            if p.surface == surface:
                taken[p.verdict] = taken.get(p.verdict, 0) + 1
        have = {v: n for (s, v), n in counts.items() if s == surface}
        assert sum(taken.values()) == min(8, sum(have.values()))
        short = [v for v in have if taken.get(v, 0) < min(have[v], max(taken.values()) - 1)]
        assert short == [], (surface, taken, have)
    assert {v for (s, v) in counts if s == "help-center"} >= {"not_judged", "yes"}  # sampled: both kinds of stratum
    # the pair is what the judge was given: the passage as it stood in the prompt, the claim, both normalized
    with connect(built / "w.duckdb", read_only=True) as con:
        judged = cited_passages(con, PLAN.start, date(2026, 11, 4))
    given = {r["citation_id"]: (r["passage"], r["claim"]) for r in judged.iter_rows(named=True)}
    assert all(given[p.citation_id] == (p.passage, p.claim) for p in larger.pairs)
    # the order shown mixes surfaces and strata: the first ten pairs are not one stratum
    assert len({(p.surface, p.verdict) for p in larger.pairs[:10]}) > 2


# ---------------------------------------------------------------------------------------------------- end to end


def test_labels_from_the_cli_land_with_their_sample_and_calibrate_and_the_nightly_run_rest_on_them(site):
    keys = keys_by_pair(site)

    def careful(passage: str, claim: str, i: int) -> str:
        return "s" if i == 3 else "u" if i == 5 else keys[(passage, claim)]

    transcript = label_with_cli(site, "ann", careful, 100)
    text = "".join(transcript)
    assert "labelling as ann into" in text and "progress: billing-assistant 0 of" in text
    assert not any(word in text for word in (*PLANTS, "not_judged"))
    log = [json.loads(line) for line in (site / "w.labels" / LOG_NAME).read_text().splitlines()]
    assert len(log) == 100 and [r["label"] for r in log].count("undo") == 1 and log[3]["label"] == "skip"
    for record in log:
        assert record["labeller"] == "ann" and record["sample_seed"] == 1 and record["sample_size"] == 100
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", record["labelled_at"])
        assert record["stratum_surface"] and record["stratum_verdict"]
    # a second labeller on the first 20 pairs of the same sample (19 in common: ann skipped the fourth), who
    # disagrees on every fourth: their agreement is reported
    flip = {"y": "n", "p": "y", "n": "y"}
    label_with_cli(site, "bob", lambda p, c, i: keys[(p, c)] if i % 4 else flip[keys[(p, c)]], 20)

    settings = dict(warehouse=site / "w.duckdb", config_file=site / "citegate.toml", labels=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(site / "dagster_home"))
        assert run_calibration(**settings).success
    db = site / "w.duckdb"
    standing = 100 - 2 - 1  # the undo took one back, the skip is no label
    assert rows(db, "select labeller, origin, count(*) from hand_labels group by all order by 1") == [
        ("ann", "own", standing),
        ("bob", "own", 20),
    ]
    [(first, second, pairs, agreed, kappa)] = rows(db, "select * exclude (computed_at) from label_agreement")
    assert (first, second, pairs, agreed) == ("ann", "bob", 19, 14) and kappa is not None
    own_rows = rows(
        db,
        "select surface, negatives, effective_negatives from judge_calibration "
        "where label_origin = 'own' and scope = 'no_or_partial' order by surface nulls first",
    )
    assert own_rows[0][0] is None and own_rows[0][1] >= 30  # pooled over surfaces
    assert all((0 < n_eff <= n + 1e-9) if n else n_eff == 0 for _, n, n_eff in own_rows), own_rows
    gates = dict(rows(db, "select surface, labels from support_gate_status where stakes <> 'off'"))
    assert set(gates.values()) == {"own"} and "planted" in gates

    # the nightly run reads the same labels folder: its status rests on them too
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(site / "dagster_home"))
        mp.setenv("CITEGATE_REVIEWS", str(site / "reviews"))
        assert run_range(PLAN, landing=site / "landing", warehouse=db, config_file=site / "citegate.toml").success
    assert set(dict(rows(db, "select surface, labels from support_gate_status where stakes <> 'off'")).values()) == {
        "own"
    }
    report = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli", "calibrate", "--warehouse", str(db)]
        + ["--config", str(site / "citegate.toml"), "--quiet"],
        cwd=site,
        env={**os.environ, "DAGSTER_HOME": str(site / "dagster_home")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    assert f"ann and bob: 14 of 19 pairs agree, kappa {kappa:.3f}" in report.stdout
    [line] = [ln for ln in report.stdout.splitlines() if ln.startswith("Support gate: judge ")]
    assert "on own labels" in line and "reference labels only" not in line


def test_own_labels_of_another_warehouse_and_files_without_a_seed_are_reference(site, tmp_path):
    keys = keys_by_pair(site)
    label_with_cli(site, "ann", lambda p, c, i: keys[(p, c)], 40)
    # another warehouse (other logs) reads the same labels file: its pairs are not that warehouse's citations
    other = tmp_path / "other"
    other.mkdir()
    generate_logs(other / "landing", days=1, requests_per_day=30, seed=11)
    (other / "labels").mkdir()
    shutil.copy(site / "w.labels" / LOG_NAME, other / "labels" / LOG_NAME)
    # and this warehouse reads a file of the same pairs without their sample seed
    stripped = [
        {k: v for k, v in json.loads(line).items() if k != "sample_seed"} | {"id": f"ref-{i}"}
        for i, line in enumerate((site / "w.labels" / LOG_NAME).read_text().splitlines())
    ]
    write_jsonl(site / "w.labels" / "copied.jsonl", stripped)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(home))
        mp.setenv("CITEGATE_LABELS", str(other / "labels"))
        mp.setenv("CITEGATE_REVIEWS", str(other / "reviews"))
        assert run_range(
            RunPlan(date(2026, 11, 2), date(2026, 11, 2)),
            landing=other / "landing",
            warehouse=other / "w.duckdb",
            config_file=site / "citegate.toml",
        ).success
        labels = site / "w.labels"
        assert run_calibration(warehouse=site / "w.duckdb", config_file=site / "citegate.toml", labels=labels).success
    assert rows(other / "w.duckdb", "select origin, count(*) from hand_labels group by 1") == [("reference", 40)]
    assert set(rows(other / "w.duckdb", "select distinct labels from support_gate_status where stakes <> 'off'")) == {
        ("reference",)
    }
    assert rows(site / "w.duckdb", "select origin, count(*) from hand_labels group by 1 order by 1") == [
        ("own", 40),
        ("reference", 40),
    ]


def test_the_demo_rests_on_reference_labels_only_and_says_what_to_do_next(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home")}
    for name in ("CITEGATE_LABELS", "CITEGATE_CONFIG", "CITEGATE_WAREHOUSE", "CITEGATE_JUDGE_BASE_URL"):
        env.pop(name, None)
    shutil.copy(PROJECT / "citegate.toml", tmp_path / "citegate.toml")  # what `make demo` reads
    done = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli", "demo", "--days", "2", "--requests-per-day", "60"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("Support gate: judge ")]
    assert "uncalibrated (reference labels only): billing-assistant, help-center, legal-faq, partner-portal" in line
    assert "off: internal-search" in line and "enforced" not in line
    assert "next: label about " in line and "(citegate label, or the review page's Label tab)" in line
    status = rows(
        tmp_path / "data" / "warehouse.duckdb", "select surface, status, labels from support_gate_status order by 1"
    )
    assert [(s, st, lb) for s, st, lb in status if st != "off"] == [
        (s, "uncalibrated (reference labels only)", "reference")
        for s in ("billing-assistant", "help-center", "legal-faq", "partner-portal")
    ]


def test_forget_takes_a_request_out_of_the_own_labels_and_names_its_log_lines(site):
    label_with_cli(site, "ann", lambda p, c, i: "y", 6)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(site / "dagster_home"))
        assert run_calibration(warehouse=site / "w.duckdb", config_file=site / "citegate.toml").success
    db = site / "w.duckdb"
    [(citation_id, line_no)] = rows(db, "select citation_id, source_line from hand_labels order by source_line limit 1")
    request_id = citation_id.rsplit("#", 1)[0]
    done = subprocess.run(
        [sys.executable, "-m", "citegate_assets.cli", "forget", "--request-id", request_id, "--warehouse", str(db)]
        + ["--config", str(site / "citegate.toml")],
        cwd=site,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert f"still in the labels folder: {LOG_NAME} line {line_no} (own label of {request_id})" in done.stdout
    assert rows(
        db, "select count(*) from hand_labels where starts_with(citation_id, $r || '#')", {"r": request_id}
    ) == [(0,)]
    assert rows(db, "select count(*) from hand_labels") == [(5,)]


# ---------------------------------------------------------------------------------------------------- with tiers

CASCADE_MODEL = "citegate-screen-v1 > judge-llm"
TIERS = ("screen", "llm", "cascade")
HUMAN = {"y": "yes", "p": "partial", "n": "no"}


def expected_rates(frame: pl.DataFrame) -> tuple[int, int, float | None, float, int]:
    """labels, false passes, the weighted false pass rate and coverage, and the false fails of one tier's rows
    (human, verdict, weight), from the rule docs/support-gate.md states: undecided and unjudged are not yes."""
    negatives = frame.filter(pl.col("human") != "yes")
    passed = negatives.filter(pl.col("verdict") == "yes")
    decided = frame.filter(~pl.col("verdict").is_in(["undecided", "unjudged"]))
    fails = frame.filter((pl.col("human") == "yes") & (pl.col("verdict") != "yes")).height
    return (
        frame.height,
        passed.height,
        passed["weight"].sum() / negatives["weight"].sum() if negatives.height else None,
        decided["weight"].sum() / frame["weight"].sum(),
        fails,
    )


def test_each_tier_is_calibrated_on_reference_and_own_labels_and_the_gate_reads_the_cascade_on_own(site, monkeypatch):
    """A cascade calibrated on own and reference labels: one row per (tier, labels, surface); every tier on the
    reference labels (unweighted) and on the own labels (weighted: W_h = N_h / n_h), pooled and per surface; the gate
    status rests on the cascade tier's own rows. Offline, an undecided own label is unjudged: a negative without a
    false pass, a false fail on a human yes."""
    monkeypatch.delenv("CITEGATE_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("CITEGATE_JUDGE_MODEL", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(site / "dagster_home"))
    kinds = truth_labels(site)
    with connect(site / "w.published.duckdb", read_only=True) as con:
        sample = draw_sample(con, 1, 100)
        stratum_n = {(s, v): n for s, v, n in strata_counts(con).iter_rows()}
    labels = site / "w.labels"
    for pair in sample.pairs:
        append_label(labels, make_line(**line_for(pair, sample, HUMAN[kinds.get(pair.citation_id, "y")], "ann")))
    demo = (PROJECT / "labels" / "demo-labels.jsonl").read_text(encoding="utf-8").splitlines()
    (labels / "reference.jsonl").write_text("\n".join(demo[:40]) + "\n", encoding="utf-8")
    in_stratum = {}
    for pair in sample.pairs:
        in_stratum[(pair.surface, pair.verdict)] = in_stratum.get((pair.surface, pair.verdict), 0) + 1
    screen = [screen_verdict(p.passage, p.claim) for p in sample.pairs]
    own = pl.DataFrame(
        {
            "surface": [p.surface for p in sample.pairs],
            "human": [HUMAN[kinds.get(p.citation_id, "y")] for p in sample.pairs],
            "screen": screen,
            "weight": [stratum_n[(p.surface, p.verdict)] / in_stratum[(p.surface, p.verdict)] for p in sample.pairs],
        }
    )
    assert own.filter(pl.col("screen") == "undecided").height > 10 and own.filter(pl.col("screen") == "yes").height

    db = site / "w.duckdb"
    config = site / "citegate.toml"
    with ScriptedJudgeServer(lambda req, i: Reply("yes")) as server:  # the LLM passes all it is sent
        config.write_text(
            CONFIG + f"[judge]\nbase_url = '{server.base_url}'\nmodel = 'judge-llm'\nmode = 'cascade'\n"
            "max_retries = 1\ntimeout_s = 5\n"
        )
        assert run_calibration(warehouse=db, config_file=config, labels=labels).success
    found = {
        (tier, origin, surface): rest
        for tier, origin, surface, *rest in rows(
            db,
            "select tier, label_origin, surface, labels, false_passes, false_pass_rate, coverage, false_fails, "
            "wilson_high from judge_calibration where scope = 'no_or_partial' and judge_model = $m",
            {"m": CASCADE_MODEL},
        )
    }
    surfaces = sorted(own["surface"].unique().to_list())
    keys = [("reference", None), ("own", None)] + [("own", s) for s in surfaces]
    assert sorted(found, key=str) == sorted(((t, o, s) for t in TIERS for o, s in keys), key=str)
    assert {t: found[(t, "reference", None)][0] for t in TIERS} == {
        "screen": 40,
        "llm": 40
        - sum(screen_verdict(json.loads(r)["passage"], json.loads(r)["claim"]) in ("yes", "no") for r in demo[:40]),
        "cascade": 40,
    }
    by_tier = {
        "screen": own.with_columns(verdict=pl.col("screen")),
        "llm": own.filter(pl.col("screen") == "undecided").with_columns(verdict=pl.lit("yes")),
        "cascade": own.with_columns(
            verdict=pl.when(pl.col("screen") == "undecided").then(pl.lit("yes")).otherwise(pl.col("screen"))
        ),
    }
    for tier, frame in by_tier.items():
        for surface in [None, *surfaces]:
            part = frame if surface is None else frame.filter(pl.col("surface") == surface)
            n, false_passes, rate, coverage, false_fails = expected_rates(part)
            got = found[(tier, "own", surface)]
            assert got[:2] == [n, false_passes] and got[4] == false_fails, (tier, surface, got)
            assert (got[2], got[3]) == pytest.approx((rate, coverage)), (tier, surface, got)
    # the LLM said yes to every pair it was sent: the cascade passes more negatives than the screen
    assert found[("cascade", "own", None)][1] > found[("screen", "own", None)][1]
    assert set(
        rows(
            db,
            "select tier, label_origin from judge_calibration_confusion where judge_model = $m",
            {"m": CASCADE_MODEL},
        )
    ) == {(t, o) for t in TIERS for o in ("reference", "own")}

    gates = rows(
        db,
        "select surface, judge_model, labels, pooled, false_pass_upper from support_gate_status where stakes <> 'off'",
    )
    assert gates and {(model, labels) for _, model, labels, _, _ in gates} == {(CASCADE_MODEL, "own")}
    for surface, _, _, pooled, upper in gates:
        assert upper == pytest.approx(found[("cascade", "own", None if pooled else surface)][5]), surface

    # no endpoint: the screen alone, and what it leaves is unjudged
    config.write_text(CONFIG)
    assert run_calibration(warehouse=db, config_file=config, labels=labels).success
    [(n, negatives, false_passes, positives, false_fails, decided)] = rows(
        db,
        "select labels, negatives, false_passes, positives, false_fails, decided from judge_calibration "
        "where judge_model = 'citegate-screen-v1' and label_origin = 'own' and surface is null "
        "and scope = 'no_or_partial'",
    )
    human_yes = own.filter(pl.col("human") == "yes")
    assert (n, negatives, positives) == (own.height, own.height - human_yes.height, human_yes.height)
    assert false_passes == own.filter((pl.col("human") != "yes") & (pl.col("screen") == "yes")).height
    assert false_fails == human_yes.filter(pl.col("screen") != "yes").height  # unjudged included
    assert decided == own.filter(pl.col("screen") != "undecided").height
    [(unjudged,)] = rows(
        db,
        "select sum(n) from judge_calibration_confusion where judge_model = 'citegate-screen-v1' "
        "and label_origin = 'own' and judge_verdict = 'unjudged'",
    )
    assert unjudged == own.filter(pl.col("screen") == "undecided").height
