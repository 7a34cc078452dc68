"""Hand labels for calibration: JSONL or CSV files with id, claim, passage, label, labeller (reference labels), and
the own-label lines `citegate label` and the review page's Label tab append (lib/calibration/label_log.py: a line with
sample_seed), replayed so that each labeller's last word on a pair stands."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import polars as pl

from citegate_assets.lib.calibration.label_log import LABELS, SEED_FIELD, LabelLine, line_of, line_problem, replay
from citegate_assets.lib.core.folders import FILE_UNREADABLE, Folder, read_named_file, unopened
from citegate_assets.lib.ingest.normalize import normalize

FIELDS = ("id", "claim", "passage", "label", "labeller")
SUFFIXES = (".jsonl", ".csv")

LABEL_SCHEMA = {
    "label_id": pl.String,
    "claim": pl.String,
    "passage": pl.String,
    "label": pl.String,
    "labeller": pl.String,
    "source_file": pl.String,
    "source_line": pl.Int64,
    # own labels only (null on a reference label): the pair, the citation and stratum it was drawn from, the sample
    "pair_key": pl.String,
    "citation_id": pl.String,
    "sample_seed": pl.Int64,
    "stratum_surface": pl.String,
    "stratum_verdict": pl.String,
    "labelled_at": pl.String,
}
REJECT_SCHEMA = {
    "source_file": pl.String,
    "line_no": pl.Int64,
    "reason": pl.String,
    "detail": pl.String,
    "raw_line": pl.String,
}


def read_labels(path: str | Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(labels, rejects) from a labels file or every *.jsonl / *.csv file of a folder (sorted by name, read by
    lib/core/folders.py's rules: an entry that is not read is one reject row with line_no 0, holding none of its
    bytes)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: labels file or folder not found")
    labels, rejects, seen = [], [], set()
    own: list[tuple[str, int, str, LabelLine]] = []
    for name, text, reason, detail in _label_files(path):
        if reason is not None:
            rejects.append({"source_file": name, "line_no": 0, "reason": reason, "detail": detail})
            continue
        for line_no, raw, record in _records(name, text):
            if SEED_FIELD in record:  # an own-label line: replayed below, after every file is read
                own_problem = line_problem(record)
                if own_problem is None:
                    own.append((name, line_no, raw, line_of(record)))
                else:
                    rejects.append(_reject(name, line_no, own_problem, raw))
                continue
            problem = _problem(record)
            if problem is None and record["id"] in seen:
                problem = ("duplicate_label_id", f"id {record['id']!r} already labelled earlier")
            if problem is not None:
                rejects.append(
                    {
                        "source_file": name,
                        "line_no": line_no,
                        "reason": problem[0],
                        "detail": problem[1],
                        "raw_line": raw,
                    }
                )
                continue
            seen.add(record["id"])
            labels.append(
                {
                    "label_id": record["id"],
                    "claim": record["claim"],
                    "passage": record["passage"],
                    "label": record["label"].strip().lower(),
                    "labeller": record["labeller"],
                    "source_file": name,
                    "source_line": line_no,
                }
            )
    labels.extend(_own_labels(own, rejects))
    frame = pl.DataFrame(labels, schema=LABEL_SCHEMA).with_columns(
        claim_normalized=normalize(pl.col("claim")), passage_normalized=normalize(pl.col("passage"))
    )
    return frame, pl.DataFrame(rejects, schema=REJECT_SCHEMA)


def _own_labels(own: list[tuple[str, int, str, LabelLine]], rejects: list[dict]) -> list[dict]:
    """The own-label lines replayed: one row per (labeller, pair) whose last word is yes, partial or no; an undo with
    nothing standing is a reject row."""
    where = {id(line): (name, line_no, raw) for name, line_no, raw, line in own}
    undone: list[LabelLine] = []
    standing = replay((line for *_, line in own), undone)
    for line in undone:
        name, line_no, raw = where[id(line)]
        rejects.append(_reject(name, line_no, ("nothing_to_undo", f"{line.labeller} has no label on the pair"), raw))
    rows = []
    for line in standing.labels():
        name, line_no, _ = where[id(line)]
        rows.append(
            {
                "label_id": f"own:{line.labeller}:{line.pair_key}",
                "claim": line.claim,
                "passage": line.passage,
                "label": line.label,
                "labeller": line.labeller,
                "source_file": name,
                "source_line": line_no,
                "pair_key": line.pair_key,
                "citation_id": line.citation_id,
                "sample_seed": line.sample_seed,
                "stratum_surface": line.stratum_surface,
                "stratum_verdict": line.stratum_verdict,
                "labelled_at": line.labelled_at,
            }
        )
    return rows


def _reject(name: str, line_no: int, problem: tuple[str, str], raw: str) -> dict:
    return {"source_file": name, "line_no": line_no, "reason": problem[0], "detail": problem[1], "raw_line": raw}


def read_labels_empty() -> tuple[pl.DataFrame, pl.DataFrame]:
    """The (labels, rejects) of an empty labels folder."""
    labels = pl.DataFrame(schema=LABEL_SCHEMA).with_columns(
        claim_normalized=pl.lit(None, dtype=pl.String), passage_normalized=pl.lit(None, dtype=pl.String)
    )
    return labels, pl.DataFrame(schema=REJECT_SCHEMA)


def _label_files(path: Path) -> Iterator[tuple[str, str, str | None, str | None]]:
    """(name, text, None, None) per file read; (name, "", reason, detail) per entry or file that is not."""
    if not path.is_dir():  # a file the operator named: its link is followed, only a regular file is read
        try:
            data = read_named_file(path)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: labels file or folder not found") from None
        except OSError as exc:
            yield path.name, "", *(unopened(path.name, exc) or (FILE_UNREADABLE, str(exc)))
            return
        yield _text(path.name, data)
        return
    for entry, fh in Folder.at(path, "labels folder").files(lambda name: Path(name).suffix in SUFFIXES):
        if fh is None:
            yield entry.name, "", entry.reason, entry.detail
            continue
        try:
            data = fh.read()
        except OSError as exc:
            yield entry.name, "", FILE_UNREADABLE, f"{entry.name}: cannot be read: {exc.strerror or exc}"
            continue
        yield _text(entry.name, data)


def _text(name: str, data: bytes) -> tuple[str, str, str | None, str | None]:
    try:
        return name, data.decode("utf-8-sig"), None, None
    except UnicodeDecodeError as exc:
        return name, "", FILE_UNREADABLE, f"{name}: not UTF-8 (byte {exc.start}); none of its lines was read"


def _records(name: str, text: str):
    if name.endswith(".csv"):
        reader = csv.DictReader(io.StringIO(text))
        for i, row in enumerate(reader, start=2):  # line 1 is the header
            yield i, ",".join(str(v) for v in row.values()), row
        return
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            yield i, line, {"__error__": f"invalid JSON: {exc}"}
            continue
        yield i, line, record if isinstance(record, dict) else {"__error__": "not a JSON object"}


def _problem(record: dict) -> tuple[str, str] | None:
    if "__error__" in record:
        return "invalid_line", record["__error__"]
    for key in FIELDS:
        value = record.get(key)
        if not isinstance(value, str) or not value.strip():
            return "missing_field", f"'{key}' is missing or empty"
    if record["label"].strip().lower() not in LABELS:
        return "invalid_label", f"label {record['label']!r} is not one of {', '.join(LABELS)}"
    return None
