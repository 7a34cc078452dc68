"""Tests of the sample-log generator. The reason checks re-derive each expected provenance reason
from the logged prompt with deliberately simple logic of their own (no code shared with loggen)."""

from __future__ import annotations

import ast
import gzip
import json
import re
import subprocess
import sys
from collections import Counter
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest

try:
    from citegate_assets.lib.loggen import MALFORMED_KINDS, REASONS, SURFACES, generate_logs
except ModuleNotFoundError:  # running pytest without the project root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from citegate_assets.lib.loggen import MALFORMED_KINDS, REASONS, SURFACES, generate_logs

DAYS, PER_DAY, SEED = 4, 150, 11
PACKAGE = Path(__file__).resolve().parents[1] / "citegate_assets" / "lib" / "loggen"
PACKAGE_NAME = "citegate_assets.lib.loggen"
# The package's modules, each importing only modules listed before it: no import cycle is possible.
LAYERS = (
    "vocabulary",
    "sentences",
    "slots",
    "corpus",
    "retrieval",
    "citations",
    "rendering",
    "request",
    "malformed",
    "demo_labels",
    "generator",
)
TEMPLATE_OF = {s.name: s.template for s in SURFACES}


# ---------------------------------------------------------------- helpers (independent of loggen)

FOLD = {
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2013": "-",
    "\u2014": "-",
    "\u2026": "...",
    "\u00a0": " ",
}


def fold(text: str) -> str:
    for a, b in FOLD.items():
        text = text.replace(a, b)
    return " ".join(text.split())


def read_lines(path: Path) -> list[str]:
    data = gzip.decompress(path.read_bytes()) if path.name.endswith(".gz") else path.read_bytes()
    return data.decode("utf-8").split("\n")[:-1]


def unmustache(text: str) -> str:
    return text.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def decode(rec: dict) -> tuple[str, str]:
    """(context part, question) of the prompt as the model saw it."""
    template, encoding = TEMPLATE_OF[rec["surface"]], rec.get("prompt_encoding", "text")
    prompt = rec["prompt"]
    if encoding == "python_repr":
        assert prompt[0] in "'\""
        prompt = ast.literal_eval(prompt)
    if template in ("langchain-stuff", "langchain-stuff-mustache"):
        body = json.loads(prompt)
        system, question = body["messages"][0]["content"], body["messages"][1]["content"]
        if template == "langchain-stuff-mustache":
            return unmustache(system), unmustache(question)
        return system, question
    if encoding == "json":  # Anthropic messages body
        body = json.loads(prompt)
        prompt = body["system"] + "\n\n" + body["messages"][0]["content"]
    if template == "llamaindex-citation":
        head, _, tail = prompt.rpartition("\n------\nQuery: ")
        return head, tail.removesuffix("\nAnswer: ")
    head, _, tail = prompt.rpartition("\n\nQuestion: ")
    return head, tail.removesuffix("\nAnswer:")


def check_reason(rec: dict, cit: dict, reason: str) -> None:
    context, question = decode(rec)
    whole = context + "\n" + question
    chunks = {c["chunk_id"]: c["text"] for c in rec["retrieved"]}
    rendered = {cid: text for cid, text in chunks.items() if text in context}
    cid, span = cit["chunk_id"], fold(cit["span"])
    assert len(span.split()) >= 5
    if reason == "fabricated_id":
        assert cid not in chunks and cid not in whole
        return
    if reason in ("dropped_before_prompt", "span_truncated"):
        text = chunks[cid]
        assert text not in whole and span in fold(text) and span not in fold(whole)
        if reason == "span_truncated":  # a prefix of the body is there, the tail is not
            assert text[: int(0.2 * len(text))] in context
        return
    assert cid in rendered, "the cited chunk must be rendered in full"
    if reason == "ok":
        assert span in fold(rendered[cid])
        assert all(span not in fold(t) for other, t in rendered.items() if other != cid)
    elif reason == "span_missing":
        assert span not in fold(whole)
    elif reason == "span_outside_context":
        assert span in fold(question) and span not in fold(context)
    elif reason == "span_in_other_chunk":
        assert span not in fold(rendered[cid])
        assert any(span in fold(t) for other, t in rendered.items() if other != cid)


def citations_of(rec: dict) -> list[dict]:
    cits = rec["citations"]
    return json.loads(cits) if isinstance(cits, str) else cits


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("loggen")
    summary = generate_logs(
        base / "logs", days=DAYS, requests_per_day=PER_DAY, seed=SEED, truth_path=base / "truth.jsonl"
    )
    truth = [json.loads(line) for line in (base / "truth.jsonl").read_text(encoding="utf-8").splitlines()]
    return base, summary, truth


@pytest.fixture(scope="module")
def records(run):
    """Every good record, with the truth lines of its citations."""
    base, _, truth = run
    bad = {(t["file"], t["line"]) for t in truth if "expected_reject" in t}
    by_request: dict[str, list[dict]] = {}
    for t in truth:
        if "citation_id" in t:
            by_request.setdefault(t["request_id"], []).append(t)
    out = []
    for path in sorted((base / "logs").iterdir()):
        for no, line in enumerate(read_lines(path), 1):
            if (path.name, no) not in bad:
                rec = json.loads(line)
                out.append((path.name, rec, by_request.get(rec["request_id"], [])))
    return out


# ---------------------------------------------------------------- tests


def test_deterministic_bytes(tmp_path):
    kwargs: dict[str, Any] = dict(days=5, requests_per_day=25, seed=3)
    a = generate_logs(tmp_path / "a", truth_path=tmp_path / "a.truth.jsonl", **kwargs)
    b = generate_logs(tmp_path / "b", truth_path=tmp_path / "b.truth.jsonl", **kwargs)
    assert a["files"] == b["files"]
    for name in a["files"]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
        assert read_lines(tmp_path / "a" / name) == read_lines(tmp_path / "b" / name)
    assert (tmp_path / "a.truth.jsonl").read_bytes() == (tmp_path / "b.truth.jsonl").read_bytes()
    generate_logs(tmp_path / "c", seed=4, days=5, requests_per_day=25)
    assert (tmp_path / "c" / a["files"][0]).read_bytes() != (tmp_path / "a" / a["files"][0]).read_bytes()


def test_file_names_and_gzip_every_fourth_day(run):
    base, summary, _ = run
    names = sorted(p.name for p in (base / "logs").iterdir())
    assert (
        names == summary["files"] == ["2026-11-02.jsonl", "2026-11-03.jsonl", "2026-11-04.jsonl", "2026-11-05.jsonl.gz"]
    )
    assert (base / "logs" / "2026-11-05.jsonl.gz").read_bytes()[:2] == b"\x1f\x8b"
    assert not (base / "truth.jsonl").is_relative_to(base / "logs")


def test_truth_inside_out_dir_is_refused(tmp_path):
    with pytest.raises(ValueError):
        generate_logs(tmp_path / "logs", days=1, requests_per_day=5, truth_path=tmp_path / "logs" / "truth.jsonl")


def test_valid_records_have_required_fields(run, records):
    _, summary, _ = run
    assert len(records) == summary["records"] == DAYS * PER_DAY
    ids = Counter(rec["request_id"] for _, rec, _ in records)
    assert max(ids.values()) == 1
    for name, rec, truth in records:
        assert re.fullmatch(r"req-\d{8}-\d{6}", rec["request_id"])
        logged = datetime.fromisoformat(rec["logged_at"])
        assert logged.tzinfo is not None and rec["logged_at"][-1] == "Z" or rec["logged_at"].endswith("+01:00")
        assert logged.astimezone(timezone.utc).date() == date.fromisoformat(name[:10])
        assert rec["surface"] in TEMPLATE_OF and isinstance(rec["answer_model"], str) and isinstance(rec["answer"], str)
        assert isinstance(rec["prompt"], str) and rec.get("prompt_encoding", "text") in ("text", "json", "python_repr")
        assert rec.get("template", TEMPLATE_OF[rec["surface"]]) == TEMPLATE_OF[rec["surface"]]
        assert [c["rank"] for c in rec["retrieved"]] == list(range(1, len(rec["retrieved"]) + 1))
        assert 3 <= len(rec["retrieved"]) <= 8
        for c in rec["retrieved"]:
            assert set(c) == {"chunk_id", "rank", "text", "doc_id", "chunking"}
            assert c["chunk_id"].startswith(c["doc_id"] + "#c") and c["chunking"] in (
                "fixed-512",
                "sentence",
                "semantic",
            )
            assert "\n[" not in c["text"] and not re.search(r"(?m)^Question:", c["text"])
        cits = citations_of(rec)
        assert 1 <= len(cits) <= 4 and len(cits) == len(truth)
        assert all(set(c) == {"chunk_id", "span", "claim"} and c["span"] and c["claim"] for c in cits)
        assert [t["citation_id"] for t in truth] == [f"{rec['request_id']}#{i}" for i in range(len(cits))]
    assert any(isinstance(rec["citations"], str) for _, rec, _ in records)
    assert any(rec["logged_at"].endswith("+01:00") for _, rec, _ in records)


def test_every_reason_and_claim_kind_occurs(run):
    _, summary, truth = run
    reasons = Counter(t["expected_reason"] for t in truth if "citation_id" in t)
    assert set(reasons) == set(REASONS)
    assert reasons == Counter({k: v for k, v in summary["expected_reasons"].items() if v})
    total = sum(reasons.values())
    assert 0.65 < reasons["ok"] / total < 0.82
    assert set(t["claim_kind"] for t in truth if "citation_id" in t) == {
        "faithful",
        "overreach",
        "numeric_mismatch",
        "unrelated",
    }


def test_expected_reasons_hold_in_the_prompt(records):
    checked: Counter[str] = Counter()
    for _, rec, truth in records:
        for cit, t in zip(citations_of(rec), truth):
            check_reason(rec, cit, t["expected_reason"])
            checked[t["expected_reason"]] += 1
    assert set(checked) == set(REASONS)


def test_claims_keep_or_change_the_numbers(records):
    for _, rec, truth in records:
        for cit, t in zip(citations_of(rec), truth):
            if t["expected_reason"] != "ok":
                continue
            span_numbers, claim_numbers = (
                Counter(re.findall(r"\d+", cit["span"])),
                Counter(re.findall(r"\d+", cit["claim"])),
            )
            if t["claim_kind"] == "faithful":
                assert claim_numbers <= span_numbers, cit
            elif t["claim_kind"] == "numeric_mismatch":
                assert not claim_numbers <= span_numbers, cit


def test_some_ok_spans_change_surface_form_only(records):
    changed = 0
    for _, rec, truth in records:
        chunks = {c["chunk_id"]: c["text"] for c in rec["retrieved"]}
        for cit, t in zip(citations_of(rec), truth):
            if t["expected_reason"] == "ok" and cit["span"] not in chunks[cit["chunk_id"]]:
                changed += 1
    ok = sum(1 for _, _, truth in records for t in truth if t["expected_reason"] == "ok")
    assert 0.2 < changed / ok < 0.4


def test_encodings_per_surface(records):
    seen = {(rec["surface"], rec.get("prompt_encoding", "text")) for _, rec, _ in records}
    assert seen == {
        ("billing-assistant", "text"),
        ("billing-assistant", "json"),
        ("help-center", "json"),
        ("legal-faq", "json"),
        ("internal-search", "text"),
        ("internal-search", "python_repr"),
        ("partner-portal", "text"),
        ("partner-portal", "python_repr"),
    }
    for _, rec, _ in records:
        if rec.get("prompt_encoding") == "python_repr":
            assert isinstance(ast.literal_eval(rec["prompt"]), str)
    mustache = [rec["prompt"] for _, rec, _ in records if rec["surface"] == "legal-faq"]
    assert sum("&amp;" in p or "&quot;" in p for p in mustache) > len(mustache) / 2
    plain_json = [rec["prompt"] for _, rec, _ in records if rec["surface"] == "help-center"]
    assert any("\\u" in p for p in plain_json) and any(re.search(r"[^\x00-\x7f]", p) for p in plain_json)


def test_malformed_lines(run):
    base, summary, truth = run
    bad = [t for t in truth if "expected_reject" in t]
    assert len(bad) == summary["malformed_lines"] >= 8
    assert set(t["expected_reject"] for t in bad) == set(MALFORMED_KINDS)
    files = {p.name: read_lines(p) for p in (base / "logs").iterdir()}
    for t in bad:
        lines = files[t["file"]]
        line, earlier = lines[t["line"] - 1], lines[: t["line"] - 1]
        kind = t["expected_reject"]
        if kind == "invalid_json":
            with pytest.raises(ValueError):
                json.loads(line)
            continue
        obj = json.loads(line)
        if kind == "missing_field":
            assert "request_id" not in obj or "prompt" not in obj
        elif kind == "wrong_type":
            assert isinstance(obj["retrieved"], str) or not isinstance(obj["prompt"], str)
        elif kind == "citations_unparseable":
            assert isinstance(obj["citations"], str)
            with pytest.raises(ValueError):
                json.loads(obj["citations"])
        elif kind == "citation_empty_span":
            assert any(c["span"] == "" for c in citations_of(obj))
        elif kind == "duplicate_same":
            assert line in earlier
        elif kind == "duplicate_conflict":
            same_id = [json.loads(e) for e in earlier if f'"request_id": "{obj["request_id"]}"' in e]
            assert same_id and all(e["prompt"] != obj["prompt"] for e in same_id)
        elif kind == "timestamp_no_timezone":
            assert datetime.fromisoformat(obj["logged_at"]).tzinfo is None


def test_prompt_kb_pads_chunks(tmp_path):
    small = generate_logs(tmp_path / "small", days=1, requests_per_day=30, malformed=False)
    big = generate_logs(tmp_path / "big", days=1, requests_per_day=30, malformed=False, prompt_kb=15)
    assert small["avg_prompt_bytes"] < 5 * 1024
    assert 0.75 * 15 * 1024 < big["avg_prompt_bytes"] < 1.25 * 15 * 1024
    assert big["malformed_lines"] == 0 and big["records"] == 30


def test_templates_in_records_adds_the_field_and_changes_nothing_else(tmp_path):
    kwargs: dict[str, Any] = dict(days=1, requests_per_day=60, seed=5, malformed=False)
    plain = generate_logs(tmp_path / "plain", **kwargs)
    named = generate_logs(tmp_path / "named", templates_in_records=True, **kwargs)
    [name] = plain["files"]
    named_lines = read_lines(tmp_path / "named" / name)
    with_field, without_field = 0, []
    for line in named_lines:
        rec = json.loads(line)
        if "template" in rec:
            assert rec.pop("template") == TEMPLATE_OF[rec["surface"]]
            with_field += 1
        without_field.append(json.dumps(rec, ensure_ascii=False))
    assert without_field == read_lines(tmp_path / "plain" / name)
    assert 0.3 < with_field / len(named_lines) < 0.7
    assert {k: v for k, v in named.items() if k != "out_dir"} == {k: v for k, v in plain.items() if k != "out_dir"}


# ---------------------------------------------------------------- the package's import structure


def _package_imports(module: str) -> set[str]:
    """The package modules `module` imports; an absolute import of the package is reported as itself."""
    found = set()
    for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module} if node.module else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(f"{PACKAGE_NAME}."):
            found.add((node.module or "").removeprefix(f"{PACKAGE_NAME}."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and "loggen" in (node.module or ""):
            found.add(f"from {node.module} import")
        elif isinstance(node, ast.Import):
            found |= {f"import {alias.name}" for alias in node.names if "loggen" in alias.name}
    return found


def test_every_module_imports_only_modules_below_it():
    assert sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__") == sorted(LAYERS)
    for index, module in enumerate(LAYERS):
        assert _package_imports(module) <= set(LAYERS[:index]), module


@pytest.mark.parametrize("module", LAYERS)
def test_each_module_imports_on_its_own_in_a_fresh_interpreter(module):
    name = f"citegate_assets.lib.loggen.{module}"
    proc = subprocess.run(
        [sys.executable, "-c", f"import {name}"], cwd=PACKAGE.parents[2], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_the_package_keeps_the_names_its_importers_use():
    from citegate_assets.lib import loggen

    for name in ("generate_logs", "PROMPT_KEPT_KINDS", "MALFORMED_KINDS", "REASONS", "SURFACES"):
        assert name in loggen.__all__ and hasattr(loggen, name), name
