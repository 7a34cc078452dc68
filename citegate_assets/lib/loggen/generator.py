"""The generator: daily citegate-log/1 files of good records with malformed lines planted between them, the
ground truth of every citation and bad line, and a summary."""

from __future__ import annotations

import gzip
import io
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from random import Random
from typing import Any, TextIO

from citegate_assets.lib.loggen.corpus import Corpus, build_corpus
from citegate_assets.lib.loggen.demo_labels import DEFAULT_COUNT, Candidate, candidates, sample_labels, write_labels
from citegate_assets.lib.loggen.malformed import MALFORMED_KINDS, malformed_line, plan_malformed
from citegate_assets.lib.loggen.request import Request, build_request, json_line
from citegate_assets.lib.loggen.vocabulary import CLAIM_KINDS, REASONS, SURFACES

LOG_FORMAT = "citegate-log/1"


def _timestamp(day: date, ms: int, offset: bool) -> str:
    h, rem = divmod(ms, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    s, milli = divmod(rem, 1000)
    if offset and h < 23:  # same instant written as +01:00 local time; stays on the same UTC day
        return f"{day.isoformat()}T{h + 1:02d}:{mi:02d}:{s:02d}.{milli:03d}+01:00"
    return f"{day.isoformat()}T{h:02d}:{mi:02d}:{s:02d}.{milli:03d}Z"


@contextmanager
def _open_day(path: Path, gz: bool) -> Iterator[TextIO]:
    if not gz:
        with open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as fh:
            yield fh
        return
    with open(path, "wb") as raw:
        # mtime=0 and no stored file name keep the compressed bytes reproducible
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gzf:
            with io.TextIOWrapper(gzf, encoding="utf-8", newline="\n") as fh:
                yield fh


@contextmanager
def _open_truth(path: Path | None) -> Iterator[TextIO | None]:
    if path is None:
        yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as fh:
        yield fh


@dataclass(frozen=True)
class _RunInputs:
    """What every day of one run draws from."""

    corpus: Corpus
    requests_per_day: int
    templates_in_records: bool


@dataclass
class _Tally:
    files: list[str] = field(default_factory=list)
    records: int = 0
    citations: int = 0
    prompt_bytes: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    claims: Counter[str] = field(default_factory=Counter)
    malformed: Counter[str] = field(default_factory=Counter)
    surfaces: Counter[str] = field(default_factory=Counter)


def _write_day(
    fh: TextIO,
    truth: TextIO | None,
    name: str,
    day: date,
    rng: Random,
    inputs: _RunInputs,
    plan: dict[int, list[str]],
    tally: _Tally,
    label_pool: list[Candidate] | None = None,
) -> None:
    times = sorted(rng.randrange(86_400_000) for _ in range(inputs.requests_per_day))
    stamp = day.strftime("%Y%m%d")
    serial = 0
    line_no = 0
    recent: deque[tuple[str, dict[str, Any]]] = deque(maxlen=32)

    def next_request(ms: int) -> Request:
        nonlocal serial
        serial += 1
        return build_request(
            rng,
            inputs.corpus,
            f"req-{stamp}-{serial:06d}",
            _timestamp(day, ms, rng.random() < 0.06),
            templates_in_records=inputs.templates_in_records,
        )

    for slot, ms in enumerate(times, 1):
        req = next_request(ms)
        line = json_line(req.record)
        fh.write(line + "\n")
        line_no += 1
        recent.append((line, req.record))
        _count(tally, req)
        if label_pool is not None:
            label_pool.extend(candidates(req.record, req.cites))
        if truth is not None:
            for pos, cite in enumerate(req.cites):
                truth.write(
                    json_line(
                        {
                            "citation_id": f"{req.record['request_id']}#{pos}",
                            "request_id": req.record["request_id"],
                            "surface": req.record["surface"],
                            "template": req.template,
                            "prompt_encoding": req.encoding,
                            "expected_reason": cite.reason,
                            "claim_kind": cite.claim_kind,
                        }
                    )
                    + "\n"
                )
        for kind in plan.get(slot, ()):
            bad = malformed_line(kind, rng, next_request(ms).record, recent)
            fh.write(bad + "\n")
            line_no += 1
            tally.malformed[kind] += 1
            if truth is not None:
                truth.write(json_line({"file": name, "line": line_no, "expected_reject": kind}) + "\n")


def _count(tally: _Tally, req: Request) -> None:
    tally.records += 1
    tally.citations += len(req.cites)
    tally.prompt_bytes += req.prompt_bytes
    tally.surfaces[req.record["surface"]] += 1
    for cite in req.cites:
        tally.reasons[cite.reason] += 1
        tally.claims[cite.claim_kind] += 1


def _truth_location(out_dir: Path, truth_path: str | Path | None, name: str = "truth_path") -> Path | None:
    if truth_path is None:
        return None
    truth = Path(truth_path).resolve()
    if out_dir.resolve() in truth.parents:
        raise ValueError(f"{name} {truth} is inside out_dir {out_dir}; the ingest would read it as a log")
    return truth


def generate_logs(
    out_dir: str | Path,
    *,
    days: int = 14,
    requests_per_day: int = 300,
    seed: int = 7,
    start_date: str = "2026-11-02",
    truth_path: str | Path | None = None,
    malformed: bool = True,
    prompt_kb: int | None = None,
    templates_in_records: bool = False,
    labels_path: str | Path | None = None,
    labels_count: int = DEFAULT_COUNT,
) -> dict[str, Any]:
    """Write `days` daily citegate-log/1 files into out_dir: YYYY-MM-DD.jsonl, every 4th day .jsonl.gz.

    Each day holds `requests_per_day` valid records; with `malformed`, about one bad line per
    150 records (at least one of each MALFORMED_KINDS) is inserted between them. `prompt_kb` pads
    chunk texts so the average prompt is about that many KiB. `truth_path` (outside out_dir)
    receives one JSON line per citation of a valid record ({"citation_id", "request_id", "surface",
    "template", "prompt_encoding", "expected_reason", "claim_kind"}) and one per malformed line
    ({"file", "line", "expected_reject"}).

    Records name no template by default: citegate finds the chunks by content (template auto), as it
    must for a team that configures nothing. `templates_in_records` makes about half of them name it,
    to exercise the named profiles through the record field too.

    `labels_path` (outside out_dir) receives hand labels drawn from the logs' truth (lib/loggen/demo_labels.py):
    a seeded sample of `labels_count` citations that pass provenance, half faithful (yes), half not (no).

    Returns a summary: files written, record/citation/malformed counts, expected reasons and
    claim kinds, records per surface, and the average prompt size in bytes.
    """
    if days < 1 or requests_per_day < 1:
        raise ValueError("days and requests_per_day must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    truth_file = _truth_location(out, truth_path)
    labels_file = _truth_location(out, labels_path, "labels_path")
    label_pool: list[Candidate] | None = [] if labels_file else None
    start = date.fromisoformat(start_date)
    corpus = build_corpus(Random(f"citegate:{seed}:corpus"), prompt_kb)
    plan = plan_malformed(Random(f"citegate:{seed}:malformed"), days, requests_per_day) if malformed else {}
    inputs = _RunInputs(corpus, requests_per_day, templates_in_records)
    tally = _Tally()
    with _open_truth(truth_file) as truth:
        for d in range(days):
            day = start + timedelta(days=d)
            gz = d % 4 == 3
            name = f"{day.isoformat()}.jsonl" + (".gz" if gz else "")
            with _open_day(out / name, gz) as fh:
                # one RNG per (seed, day): a day's file does not depend on how the others were made
                _write_day(
                    fh, truth, name, day, Random(f"citegate:{seed}:day:{d}"), inputs, plan.get(d, {}), tally, label_pool
                )
            tally.files.append(name)
    labels = sample_labels(label_pool, labels_count, seed) if label_pool is not None else []
    if labels_file is not None:
        write_labels(labels_file, labels)
    return {
        "format": LOG_FORMAT,
        "out_dir": str(out),
        "truth_path": str(truth_file) if truth_file else None,
        "labels_path": str(labels_file) if labels_file else None,
        "labels": {v: sum(1 for r in labels if r["label"] == v) for v in ("yes", "no")},
        "files": tally.files,
        "records": tally.records,
        "citations": tally.citations,
        "malformed_lines": sum(tally.malformed.values()),
        "malformed_kinds": {k: tally.malformed[k] for k in MALFORMED_KINDS},
        "expected_reasons": {r: tally.reasons[r] for r in REASONS},
        "claim_kinds": {k: tally.claims[k] for k in CLAIM_KINDS},
        "surfaces": {s.name: tally.surfaces[s.name] for s in SURFACES},
        "avg_prompt_bytes": round(tally.prompt_bytes / tally.records) if tally.records else 0,
        "corpus_chunks": len(corpus.chunks),
    }
