"""Locating chunks by their text (template `auto`, and a named profile's block searched by content) does a bounded
amount of work: on adversarial prompts it either finishes within its budget or stops there and locates nothing, so
every citation of the prompt is unverifiable (`location_budget_exceeded`, `context_not_found`), never passed on a
guess. The work is counted two ways: by the locator's own counter, and here by counting the searches it makes."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from citegate_assets import guard
from citegate_assets.lib import loggen
from citegate_assets.lib.config import load_config, parse_config
from citegate_assets.lib.ingest import locate
from citegate_assets.lib.ingest.containers import decode_body
from citegate_assets.lib.ingest.doctor import doctor
from citegate_assets.lib.ingest.layout import prompt_layout
from citegate_assets.lib.ingest.stream import ingest_landing
from citegate_assets.lib.provenance.gate import check_provenance

from .helpers import write_jsonl

PROJECT = Path(__file__).resolve().parents[1]

MAX_SEARCHES = 20_000  # far more than any shape below needs; the unbounded search made millions


class CountedSearches:
    """locate.find_text, counted: calls, and characters each may scan (from where it starts to its match or end). The
    Python path is counted: the compiled pass makes the same searches (tests/test_locate_compiled.py)."""

    def __init__(self, monkeypatch):
        monkeypatch.setattr(locate, "_compiled", None)
        self.calls, self.scanned = 0, 0
        real = locate.find_text

        def counted(prompt, text, at=0, hi=None, work=None):
            self.calls += 1
            if self.calls > MAX_SEARCHES:
                raise AssertionError(f"more than {MAX_SEARCHES} searches")
            found = real(prompt, text, at, hi) if work is None else real(prompt, text, at, hi, work)
            end = len(prompt) if hi is None else hi
            self.scanned += max(0, (found + len(text) if found >= 0 else end) - at)
            return found

        monkeypatch.setattr(locate, "find_text", counted)


def _repetitive_chunk_and_near_matches():
    big = "ab" * 500_000  # 1 MB: its first 40 characters stand at every other position
    near = [big[:40] + f" variant {i} that is never in the prompt whole, only its start." for i in range(40)]
    prompt = "Context:\n" + big + "\n" + "\n".join(n[:60] for n in near) + "\nQuestion: what varies?"
    return prompt, [{"chunk_id": "big", "text": big}] + [
        {"chunk_id": f"near-{i}", "text": t} for i, t in enumerate(near)
    ]


def test_a_repetitive_chunk_with_near_matches_is_located_in_a_bounded_number_of_searches(monkeypatch):
    """The reproduction: every near-match's opening stands 500,000 times inside the big chunk; the search walked
    each occurrence for each prefix length of each near-match (14-18 s in check_prompt)."""
    prompt, retrieved = _repetitive_chunk_and_near_matches()
    searches = CountedSearches(monkeypatch)
    report = guard.check_prompt(prompt, retrieved)
    assert report.status == "ok"
    assert [(c.chunk_id, c.arrived) for c in report.chunks] == [("big", "whole")] + [
        (f"near-{i}", "cut") for i in range(40)
    ]
    assert searches.calls < 2_000
    assert searches.scanned < 64 * len(prompt)


def _shared_prefix():
    prefix = "".join(f"word{i} " for i in range(300))  # 2.7 KB every chunk opens with
    chunks = [prefix + f"tail {i} " * 50 for i in range(300)]
    return "\n".join(c[: len(prefix) + 20] for c in chunks), chunks


def _one_character():
    return "Sources: " + "a" * 1_000_000 + " Question?", ["a" * 1_000_000] + ["a" * 500 + f"b{i}" for i in range(100)]


def _repeated_forty_characters():
    unit = "0123456789abcdefghijklmnopqrstuvwxyzABCD"
    return unit * 25_000, [unit * 3 + f" different {i}" for i in range(100)]


def _many_small_pieces():
    text = " ".join(f"w{i}x" for i in range(60_000))
    return "".join(text[k : k + 60] + " | file_path: /data/kb.txt | " for k in range(0, len(text), 60)), [text]


SHAPES = {
    "300 chunks sharing a 2.7 KB opening, each cut": _shared_prefix,
    "1 MB of one character, 100 chunks that start the same": _one_character,
    "1 MB prompt of 40 characters repeated, 100 chunks opening with them": _repeated_forty_characters,
    "a 420 KB chunk re-split in 60-character pieces": _many_small_pieces,
}


@pytest.mark.parametrize("shape", SHAPES)
def test_adversarial_shapes_finish_within_the_budget_or_locate_nothing(shape, monkeypatch):
    prompt, texts = SHAPES[shape]()
    chunks = [(f"c{i}", t) for i, t in enumerate(texts)]
    searches = CountedSearches(monkeypatch)
    got = locate.locate_chunks(prompt, chunks)
    budget = locate.work_budget(len(prompt), sum(len(t) for t in texts))
    # the budget, and at most one search or comparison more: the one that crossed it
    assert got.work <= budget + len(prompt) + max(map(len, texts)) + locate.CALL_CHARS
    assert searches.scanned <= got.work
    if got.over_budget:
        assert (got.regions, got.positions, got.context) == ([], {}, None)
    else:
        assert got.regions and got.context is not None


def _over_budget_record() -> dict:
    """A 100 KB prompt of one 40-character unit repeated and 400 chunks that open with it and then differ: each
    prefix length of each chunk stands nowhere, so each is sought through the whole prompt."""
    unit = "0123456789abcdefghijklmnopqrstuvwxyzABCD"
    retrieved = [{"chunk_id": f"kb-{i}", "text": unit * 3 + f" and then chunk {i} differs."} for i in range(400)]
    return {
        "request_id": "over-budget",
        "logged_at": "2026-11-02T10:00:00Z",
        "surface": "s",
        "answer_model": "m",
        "prompt": "Context: " + unit * 2_500 + "\nQuestion: which one?",
        "prompt_encoding": "text",
        "retrieved": retrieved,
        "citations": [{"chunk_id": "kb-1", "span": unit * 2, "claim": "c"}],
    }


def test_a_prompt_over_the_budget_is_unverifiable_in_the_guard():
    record = _over_budget_record()
    report = guard.check_citations(record["prompt"], record["retrieved"], record["citations"])
    assert report.prompt.status == "location_budget_exceeded" and not report.prompt.context_found
    assert [(c.reason, c.verdict) for c in report.citations] == [("context_not_found", "unverifiable")]
    assert not report.ok
    assert report.prompt.failures[0].startswith("chunks not located: the search of the prompt hit its work bound")
    with pytest.raises(guard.GuardError, match="hit its work bound"):  # whatever was asked for, it was not checked
        guard.check_prompt(record["prompt"], record["retrieved"], raise_on={"cut"})
    with pytest.raises(guard.GuardError, match="hit its work bound"):
        guard.check_citations(record["prompt"], record["retrieved"], record["citations"], raise_on={"span_missing"})


@pytest.mark.parametrize("template", ["auto", "llamaindex-citation"])
def test_a_prompt_over_the_budget_is_unverifiable_in_the_pipeline(template, con, landing, config):
    record = _over_budget_record()
    if template != "auto":  # a named profile whose block is searched by content
        record["template"] = template
        record["prompt"] = (
            record["prompt"].replace("Context: ", "------\nSource 1:\n").replace("\nQuestion:", "\n------\nQuery:")
        )
    ok = {
        **record,
        "request_id": "fine",
        "template": "auto",
        "prompt": "Context: Refunds take 3 days.",
        "retrieved": [{"chunk_id": "kb-1", "text": "Refunds take 3 days."}],
        "citations": [{"chunk_id": "kb-1", "span": "Refunds take 3 days.", "claim": "c"}],
    }
    write_jsonl(landing / "day.jsonl", [record, ok])
    summary = ingest_landing(con, landing, config)
    assert (summary.records_ingested, summary.records_rejected) == (2, 0)
    check_provenance(con, date(2026, 11, 2), date(2026, 11, 3))
    assert dict(con.sql("select request_id, profile_status from prompts").fetchall()) == {
        "over-budget": "location_budget_exceeded",
        "fine": "ok",
    }
    assert con.sql("select count(*) from prompt_sections where request_id = 'over-budget'").fetchall() == [(0,)]
    assert sorted(con.sql("select citation_id, reason, verdict from provenance_results").fetchall()) == [
        ("fine#0", "ok", "present"),
        ("over-budget#0", "context_not_found", "unverifiable"),
    ]


def _layout_work(prompt, retrieved, encoding, template, templates):
    messages = decode_body(prompt, encoding).messages
    layout = prompt_layout([(m.role, m.text) for m in messages], retrieved, template, templates)
    if layout.located is None:
        return None
    chars = len(layout.prompt) + sum(len(t) for t in layout.chunk_texts.values())
    return layout.located.work / locate.work_budget(len(layout.prompt), chars - len(layout.prompt))


def test_ordinary_prompts_use_a_small_share_of_the_budget(tmp_path):
    """The demo logs (auto and named profiles) and the prompts the real frameworks rendered."""
    loggen.generate_logs(tmp_path / "landing", days=1, requests_per_day=200, seed=5, templates_in_records=True)
    demo = load_config(PROJECT / "citegate.toml")
    shares = []
    for path in [*(tmp_path / "landing").glob("*.jsonl"), *(PROJECT / "tests/fixtures/frameworks").glob("*.jsonl")]:
        if path.name == "truth.jsonl":
            continue
        config = demo if path.parent.name == "landing" else parse_config({}, None)
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
                retrieved = [{"chunk_id": r["chunk_id"].strip(), "text": r["text"]} for r in rec["retrieved"]]
                template = rec.get("template") or config.surface(rec["surface"]).template
                share = _layout_work(
                    rec["prompt"], retrieved, rec.get("prompt_encoding", "text"), template, config.templates
                )
            except Exception:  # noqa: BLE001 — the malformed lines the generator plants
                continue
            if share is not None:
                shares.append(share)
    assert len(shares) > 100
    assert max(shares) < 0.05


def test_doctor_counts_a_prompt_over_the_budget_as_a_misfit(landing, config):
    write_jsonl(landing / "day.jsonl", [_over_budget_record()])
    [fit] = doctor(landing, config, now=datetime(2026, 11, 30, tzinfo=timezone.utc)).fits
    assert (fit.records, fit.over_budget, fit.no_block, fit.fits) == (1, 1, 0, False)
    assert "chunks not located within the work bound in 1 of 1 prompts" in fit.verdict()
    assert fit.examples["over_budget"].request_id == "over-budget"
