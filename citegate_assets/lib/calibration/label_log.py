"""The own labels log: what a labeller said about each pair of the warehouse's own sample
(lib/calibration/own_labels.py), one
JSON line per key press, appended to ``own-labels.jsonl`` in the labels folder.

A line: ``id`` (uuid4 hex), ``label`` (yes | partial | no | skip | undo), ``labeller``, ``labelled_at`` (RFC 3339 UTC
with microseconds), ``pair_key`` (the pair: sha256 of the normalized passage's and claim's sha256), ``citation_id``
(the citation it was drawn from), ``stratum_surface`` and ``stratum_verdict`` (its stratum when drawn),
``sample_seed`` and ``sample_size`` (the sample it was drawn in), and for yes / partial / no the ``claim`` and
``passage`` as shown (normalized; they must hash to ``pair_key``). A line with ``sample_seed`` is an own-label line;
any other line of the labels folder is a reference label (lib/calibration/labels.py).

The log is append-only (lib/core/appendlog.py: one os.write under an exclusive flock, fsync, O_NOFOLLOW, 0600). Replayed
in
order, each (labeller, pair) stands at its labeller's last yes / partial / no / skip, and ``undo`` takes that back:
the pair is then unlabelled for that labeller. A later label of the same pair by the same labeller replaces the
earlier one; both lines stay.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

from citegate_assets.lib.core.appendlog import LogRefused, append_line
from citegate_assets.lib.core.folders import Folder

LABELS = ("yes", "partial", "no")
SKIP, UNDO = "skip", "undo"
ACTIONS = (*LABELS, SKIP, UNDO)
LOG_NAME = "own-labels.jsonl"
DEFAULT_SEED = 1  # the sample's seed when none is given (`citegate label`, the Label tab)
DEFAULT_SIZE = 100  # pairs per surface
SEED_FIELD = "sample_seed"  # the field that makes a line of the labels folder an own-label line

_HEX64 = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


class LabelError(ValueError):
    """A label line that cannot be written; the message names what is wrong. Nothing was written."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def pair_key(passage: str, claim: str) -> str:
    """The pair's identity, whoever judges it: the judge cache's key without the judge model and template version
    (lib/support/judging.py cache_key), over the normalized passage and claim. Duplicates across requests are one
    pair."""
    return _sha("\x1f".join((_sha(passage), _sha(claim))))


@dataclass(frozen=True)
class LabelLine:
    id: str
    label: str  # yes | partial | no | skip | undo
    labeller: str
    labelled_at: str
    pair_key: str
    citation_id: str
    stratum_surface: str
    stratum_verdict: str
    sample_seed: int
    sample_size: int
    claim: str | None  # yes / partial / no only: the pair as shown
    passage: str | None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)

    @property
    def is_label(self) -> bool:
        return self.label in LABELS


FIELDS = tuple(f.name for f in fields(LabelLine))
_INTS = ("sample_seed", "sample_size")
_TEXTS = ("claim", "passage")


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime(_TIMESTAMP_FORMAT)


def make_line(
    *,
    label: str,
    labeller: str,
    pair_key: str,
    citation_id: str,
    stratum_surface: str,
    stratum_verdict: str,
    sample_seed: int,
    sample_size: int,
    claim: str | None = None,
    passage: str | None = None,
    now: datetime | None = None,
) -> LabelLine:
    """A validated line with a fresh id and timestamp (LabelError naming the problem). Skip and undo carry no text."""
    label = label.strip().lower()
    keep_text = label in LABELS
    line = LabelLine(
        id=uuid.uuid4().hex,
        label=label,
        labeller=labeller.strip(),
        labelled_at=format_timestamp(now or datetime.now(timezone.utc)),
        pair_key=pair_key,
        citation_id=citation_id,
        stratum_surface=stratum_surface,
        stratum_verdict=stratum_verdict,
        sample_seed=sample_seed,
        sample_size=sample_size,
        claim=claim if keep_text else None,
        passage=passage if keep_text else None,
    )
    problem = line_problem(asdict(line))
    if problem is not None:
        raise LabelError(problem[1])
    return line


def line_problem(record: dict) -> tuple[str, str] | None:
    """(reason code, detail) when a record is not a valid own-label line, else None."""
    for name in FIELDS:
        if name not in record:
            return "missing_field", f"'{name}' is missing"
    for name in FIELDS:
        value = record[name]
        if name in _INTS:
            if not isinstance(value, int) or isinstance(value, bool):
                return "missing_field", f"'{name}' must be a whole number, got {type(value).__name__}"
            continue
        if name in _TEXTS and value is None:
            continue
        if not isinstance(value, str):
            return "missing_field", f"'{name}' must be a string, got {type(value).__name__}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "missing_field", f"'{name}' is not valid Unicode (lone surrogate)"
        if name not in _TEXTS and not value.strip():
            return "missing_field", f"'{name}' is empty"
    if record["label"] not in ACTIONS:
        return "invalid_label", f"label {record['label']!r} is not one of {', '.join(ACTIONS)}"
    if record["sample_size"] <= 0:
        return "missing_field", f"'sample_size' must be positive, got {record['sample_size']}"
    if not _HEX64.fullmatch(record["pair_key"]):
        return "missing_field", f"pair_key {record['pair_key']!r} is not a sha256 hex digest"
    if not _TIMESTAMP.fullmatch(record["labelled_at"]):
        return "missing_field", f"labelled_at {record['labelled_at']!r} is not RFC 3339 UTC with microseconds"
    if record["label"] in LABELS:
        claim, passage = record["claim"], record["passage"]
        if not (isinstance(claim, str) and claim.strip() and isinstance(passage, str) and passage.strip()):
            return "missing_field", f"a {record['label']} label needs the claim and the passage it was given on"
        if pair_key(passage, claim) != record["pair_key"]:
            return "pair_key_mismatch", "the claim and passage do not hash to pair_key (edited after labelling?)"
    return None


def line_of(record: dict) -> LabelLine:
    """A record that passed line_problem, as a LabelLine (unknown extra keys are ignored)."""
    return LabelLine(**{name: record[name] for name in FIELDS})


def append_label(folder: Path, line: LabelLine) -> Path:
    """One line appended to ``folder/own-labels.jsonl`` (validated first; LabelError and nothing written when the
    line or the log is refused)."""
    problem = line_problem(asdict(line))
    if problem is not None:
        raise LabelError(problem[1])
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise LabelError(
            f"{folder}: a file; own labels are appended to {LOG_NAME} in a labels folder: name a folder with "
            "--labels (or $CITEGATE_LABELS, [calibration].labels)"
        )
    try:
        return append_line(folder, LOG_NAME, line.to_json().encode("utf-8"), "the own labels log")
    except LogRefused as exc:
        raise LabelError(str(exc)) from None


@dataclass
class Standing:
    """The replayed log: each (labeller, pair_key) at its last yes / partial / no / skip, in the order they were
    made (an undo removes its pair; a new line moves its pair to the end)."""

    lines: dict[tuple[str, str], LabelLine]

    def of(self, labeller: str) -> dict[str, LabelLine]:
        return {key: line for (who, key), line in self.lines.items() if who == labeller}

    def last_of(self, labeller: str) -> LabelLine | None:
        """What `undo` takes back: the labeller's latest standing line."""
        found = None
        for (who, _), line in self.lines.items():
            if who == labeller:
                found = line
        return found

    def labels(self) -> list[LabelLine]:
        """The standing yes / partial / no lines (skips are no labels)."""
        return [line for line in self.lines.values() if line.is_label]


def replay(lines: Iterable[LabelLine], undone: list[LabelLine] | None = None) -> Standing:
    """The log replayed in order; an undo with nothing standing is appended to `undone` when given."""
    standing: dict[tuple[str, str], LabelLine] = {}
    for line in lines:
        key = (line.labeller, line.pair_key)
        if line.label == UNDO:
            if standing.pop(key, None) is None and undone is not None:
                undone.append(line)
            continue
        standing.pop(key, None)
        standing[key] = line
    return Standing(standing)


def read_label_log(folder: Path) -> list[LabelLine]:
    """Every valid own-label line of the labels folder's *.jsonl files, in order (files by name), read by
    lib/core/folders.py's rules. Other lines (reference labels, bad lines) are lib/calibration/labels.py's to report."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    out: list[LabelLine] = []
    for _entry, fh in Folder.at(folder, "labels folder").files(lambda name: name.endswith(".jsonl")):
        if fh is None:
            continue
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)  # whole lines only: wait out a writer in the middle of one
            try:
                data = fh.read()
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except OSError:
            continue
        out.extend(line for _, line in own_lines(data.decode("utf-8", errors="replace")))
    return out


def own_lines(text: str) -> Iterator[tuple[int, LabelLine]]:
    for number, raw in enumerate(text.split("\n"), start=1):
        if SEED_FIELD not in raw:
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict) and SEED_FIELD in record and line_problem(record) is None:
            yield number, line_of(record)


def log_stamp(folder: Path) -> tuple:
    """What changes when the folder's JSONL files do (name, size, mtime): a cache keyed on it is fresh."""
    folder = Path(folder)
    if not folder.is_dir():
        return ()
    stamps: list[tuple[str, int | None, int | None]] = []
    for entry in Folder.at(folder, "labels folder").entries():
        if entry.name.endswith(".jsonl"):
            try:
                st = entry.path.stat()
                stamps.append((entry.name, st.st_mtime_ns, st.st_size))
            except OSError:
                stamps.append((entry.name, None, None))
    return tuple(stamps)


@dataclass(frozen=True)
class LabellerAgreement:
    first: str
    second: str
    pairs: int  # pairs both labelled yes, partial or no
    agreed: int
    kappa: float | None  # Cohen's kappa over yes / partial / no; None when undefined (lib/support/agreement.py)


def labeller_agreement(said: Iterable[tuple[str, str, str]]) -> list[LabellerAgreement]:
    """said: (labeller, pair_key, label) of the standing own labels. Per two labellers who labelled a pair in
    common: how often they agree, and Cohen's kappa."""
    # the judges' module (polars): `citegate --help` imports this file
    from citegate_assets.lib.support.agreement import cohen_kappa

    by_pair: dict[str, dict[str, str]] = {}
    for labeller, key, label in said:
        if label in LABELS:
            by_pair.setdefault(key, {})[labeller] = label
    names = sorted({who for labelled in by_pair.values() for who in labelled})
    out = []
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            confusion: dict[tuple[str, str], int] = {}
            for labelled in by_pair.values():
                if first in labelled and second in labelled:
                    cell = (labelled[first], labelled[second])
                    confusion[cell] = confusion.get(cell, 0) + 1
            pairs = sum(confusion.values())
            if pairs:
                agreed = sum(n for (a, b), n in confusion.items() if a == b)
                out.append(LabellerAgreement(first, second, pairs, agreed, cohen_kappa(confusion, LABELS)))
    return out
