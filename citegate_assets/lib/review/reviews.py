"""The reviews log: one JSON line per reviewer decision, appended to JSONL files in a reviews folder.

The CLI appends (``append_review``); the pipeline reads every file back (``read_reviews``) and keeps the latest
decision per citation (``latest_by_citation``). The log is append-only: a decision is never rewritten, a later
review of the same citation supersedes an earlier one by ``reviewed_at``.

Writers are safe against each other: every append opens the file with ``O_APPEND`` (and ``O_NOFOLLOW``: a log
replaced by a link, a FIFO or a directory is refused), holds an exclusive ``flock`` while it writes the whole line
with one ``os.write`` and ``fsync``s it. Readers read the folder by lib/core/folders.py's rules (no link out of it, no
FIFO) and take a shared lock, so they see whole lines only. A line cut short by a writer killed mid-write (no
trailing newline) is reported as an error line, never raised, and the next append starts on a fresh line so the
damage stays confined to that one line.

Reviews hold user data (claims, passages, notes, reviewer names): the folder is created 0o700 and files 0o600.
"""

from __future__ import annotations

import fcntl
import getpass
import json
import os
import re
import uuid
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from citegate_assets.lib.core.appendlog import LogRefused, append_line
from citegate_assets.lib.core.folders import FILE_UNREADABLE, Folder

OUTCOMES = ("accept", "repair", "escalate")
CAUSES = ("chunking", "truncation", "ranking", "other")
LOG_NAME = "reviews.jsonl"

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")
_TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
_CAUSE_LIST = ", ".join(CAUSES)


class ReviewError(ValueError):
    """A review that cannot be recorded; the message names what is wrong. Nothing was written."""


@dataclass(frozen=True)
class Review:
    review_id: str  # uuid4 hex
    citation_id: str
    outcome: str  # accept | repair | escalate
    cause: str | None  # required for escalate, optional for repair, refused for accept
    note: str | None
    reviewer: str
    reviewed_at: str  # RFC 3339 UTC with microseconds: 2026-11-30T06:30:01.123456Z
    queue_reason: str  # the queue reason the entry had when it was reviewed
    claim: str  # snapshot: an accept can become a calibration sample without re-running anything
    passage: str | None

    def to_json(self) -> str:
        """One line (no newline at the end), sorted keys, non-ASCII kept as is."""
        return json.dumps(asdict(self), sort_keys=True, ensure_ascii=False)


FIELDS = tuple(f.name for f in fields(Review))


@dataclass(frozen=True)
class LogLine:
    file: str  # file name inside the reviews folder
    line_no: int  # 1-based; 0 for a file that was not read
    review: Review | None  # None when the line is not a valid review
    error: str | None  # why the line is not a valid review
    raw: str | None  # the line as written (without its newline); None for a file that was not read


# ---------------------------------------------------------------------------------------------------- building


def default_reviewer() -> str:
    """$CITEGATE_REVIEWER, else $USER, else the login name, else "unknown"."""
    for var in ("CITEGATE_REVIEWER", "USER"):
        value = (os.environ.get(var) or "").strip()
        if value:
            return value
    try:
        value = (getpass.getuser() or "").strip()
    except Exception:  # no passwd entry (containers), no env: getuser raises OSError or KeyError
        value = ""
    return value or "unknown"


def format_timestamp(moment: datetime) -> str:
    """RFC 3339 UTC with microseconds; a naive datetime is refused (its zone would be a guess)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ReviewError(f"now must be timezone-aware, got naive datetime {moment.isoformat()}")
    return moment.astimezone(timezone.utc).strftime(_TIMESTAMP_FORMAT)


def make_review(
    *,
    citation_id: str,
    outcome: str,
    cause: str | None = None,
    note: str | None = None,
    reviewer: str | None = None,
    queue_reason: str,
    claim: str,
    passage: str | None,
    now: datetime | None = None,
) -> Review:
    """A validated review with a fresh id and timestamp; raises ReviewError naming the problem.

    outcome, cause, note, reviewer and queue_reason are stripped (outcome and cause also lower-cased; an empty
    note or cause counts as none). citation_id is kept exactly as given: ids are looked up and recorded as
    stored, and request ids may hold spaces (" r1#2" and "r1#2" are two citations). claim and passage are
    snapshots and kept verbatim.
    """
    for name, value in (("citation_id", citation_id), ("outcome", outcome), ("queue_reason", queue_reason)):
        if not isinstance(value, str):
            raise ReviewError(f"{name} must be a string, got {type(value).__name__}")
    for name, optional in (("cause", cause), ("note", note), ("reviewer", reviewer)):
        if optional is not None and not isinstance(optional, str):
            raise ReviewError(f"{name} must be a string or None, got {type(optional).__name__}")
    outcome = outcome.strip().lower()
    cause = (cause.strip().lower() or None) if cause is not None else None
    note = (note.strip() or None) if note is not None else None
    reviewer = reviewer.strip() if reviewer is not None else default_reviewer()
    review = Review(
        review_id=uuid.uuid4().hex,
        citation_id=citation_id,  # never stripped: the id looked up is the id recorded
        outcome=outcome,
        cause=cause,
        note=note,
        reviewer=reviewer,
        reviewed_at=format_timestamp(now if now is not None else datetime.now(timezone.utc)),
        queue_reason=queue_reason.strip(),
        claim=claim,
        passage=passage,
    )
    problem = review_problem(review)
    if problem is not None:
        raise ReviewError(problem)
    return review


def review_problem(review: Review) -> str | None:
    """Why a review cannot be recorded or trusted, or None when it is valid."""
    for name in FIELDS:
        value = getattr(review, name)
        nullable = name in ("cause", "note", "passage")
        if value is None and nullable:
            continue
        if not isinstance(value, str):
            kind = "a string or null" if nullable else "a string"
            return f"{name} must be {kind}, got {type(value).__name__}"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{name} is not valid Unicode (lone surrogate)"
    if not re.fullmatch(r"[0-9a-f]{32}", review.review_id):
        return f"review_id {review.review_id!r} is not a uuid4 hex string"
    for name in ("citation_id", "reviewer", "queue_reason", "claim"):
        if not getattr(review, name).strip():
            return f"{name} is empty"
    if review.outcome not in OUTCOMES:
        return f"unknown outcome {review.outcome!r} (expected accept, repair or escalate)"
    if review.cause is not None and review.cause not in CAUSES:
        return f"unknown cause {review.cause!r} (expected one of: {_CAUSE_LIST})"
    if review.outcome == "escalate" and review.cause is None:
        return f"escalate needs --cause (one of: {_CAUSE_LIST})"
    if review.outcome == "accept" and review.cause is not None:
        return f"accept takes no --cause (got {review.cause!r}); a cause is for repair or escalate"
    if not _TIMESTAMP.fullmatch(review.reviewed_at):
        return f"reviewed_at {review.reviewed_at!r} is not RFC 3339 UTC with microseconds (2026-11-30T06:30:01.123456Z)"
    try:
        datetime.strptime(review.reviewed_at, _TIMESTAMP_FORMAT)
    except ValueError:
        return f"reviewed_at {review.reviewed_at!r} is not a real date and time"
    return None


# ---------------------------------------------------------------------------------------------------- writing


def append_review(folder: Path, review: Review) -> Path:
    """Append one review as one line to ``folder/reviews.jsonl``; returns the file path.

    Validates first (ReviewError, nothing written). Creates the folder (0o700) and the file (0o600) if missing.
    The line is written under an exclusive flock with a single os.write and fsync'd before the lock is released,
    so concurrent writers never interleave and a returned call means the review is on disk (lib/core/appendlog.py).
    """
    if not isinstance(review, Review):
        raise ReviewError(f"expected a Review, got {type(review).__name__}")
    problem = review_problem(review)
    if problem is not None:
        raise ReviewError(problem)
    try:
        return append_line(Path(folder), LOG_NAME, review.to_json().encode("utf-8"), "the reviews log")
    except LogRefused as exc:
        raise ReviewError(str(exc)) from None


# ---------------------------------------------------------------------------------------------------- reading


def read_reviews(folder: Path) -> list[LogLine]:
    """Every line of every *.jsonl file in the folder (files sorted by name, lines in order), read by
    lib/core/folders.py's
    rules: an entry that is not read (a link out of the folder, a FIFO, a directory...) is one line 0 whose error
    starts with its reason code, holding none of its bytes.

    A missing folder gives []. Blank lines are skipped. A line that is not valid UTF-8 or JSON, misses a field
    or holds an invalid value gives review=None and error=<reason>; so does a final line without a trailing
    newline (a writer killed mid-write). Nothing here raises for bad content.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    out: list[LogLine] = []
    for entry, fh in Folder.at(folder, "reviews folder").files(_is_log_name):
        if fh is None:
            out.append(LogLine(entry.name, 0, None, f"{entry.reason}: {entry.detail}", None))
            continue
        try:
            out.extend(_read_file(entry.name, fh))
        except OSError as exc:
            out.append(LogLine(entry.name, 0, None, f"{FILE_UNREADABLE}: {entry.name}: {exc.strerror or exc}", None))
    return out


def log_stamp(folder: Path) -> tuple:
    """What changes when the log does: each log file's name, size and mtime (a refused entry: its reason)."""
    if not folder.is_dir():
        return ()
    stamps: list[tuple] = []
    for entry in Folder.at(folder, "reviews folder").entries():
        if not _is_log_name(entry.name):
            continue
        changed: tuple[int, int] | None = None
        if entry.reason is None:
            try:
                st = os.stat(entry.path)
                changed = (st.st_mtime_ns, st.st_size)
            except OSError:
                pass  # gone since the listing
        stamps.append((entry.name, entry.reason, changed))
    return tuple(stamps)


def _is_log_name(name: str) -> bool:
    return name.endswith(".jsonl")


def _read_file(name: str, handle: BinaryIO) -> list[LogLine]:
    fcntl.flock(handle.fileno(), fcntl.LOCK_SH)  # whole lines only: wait out a writer in the middle of one
    try:
        data = handle.read()
    finally:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    # split on b"\n" only: str.splitlines would also break on U+2028 etc., which ensure_ascii=False leaves raw
    chunks = data.split(b"\n")
    last = chunks.pop()  # b"" when the file ends with a newline; otherwise an unfinished line
    lines: list[LogLine] = []
    for i, chunk in enumerate(chunks, start=1):
        if chunk.strip():
            lines.append(_parse_line(name, i, chunk))
    if last.strip():
        raw = last.decode("utf-8", errors="replace")
        error = "incomplete last line (no trailing newline): a writer was interrupted mid-write"
        lines.append(LogLine(name, len(chunks) + 1, None, error, raw))
    return lines


def _parse_line(file: str, line_no: int, chunk: bytes) -> LogLine:
    try:
        raw = chunk.decode("utf-8")
    except UnicodeDecodeError as exc:
        return LogLine(file, line_no, None, f"not valid UTF-8: {exc}", chunk.decode("utf-8", errors="replace"))
    raw = raw.removesuffix("\r")
    try:
        record = json.loads(raw)
    except ValueError as exc:
        return LogLine(file, line_no, None, f"invalid JSON: {exc}", raw)
    if not isinstance(record, dict):
        return LogLine(file, line_no, None, f"not a JSON object (got {type(record).__name__})", raw)
    missing = [name for name in FIELDS if name not in record]
    if missing:
        return LogLine(file, line_no, None, f"missing field(s): {', '.join(missing)}", raw)
    review = Review(**{name: record[name] for name in FIELDS})  # unknown extra fields are ignored
    problem = review_problem(review)
    if problem is not None:
        return LogLine(file, line_no, None, problem, raw)
    return LogLine(file, line_no, review, None, raw)


def latest_by_citation(lines: list[LogLine]) -> dict[str, Review]:
    """The latest valid review per citation: by reviewed_at, ties broken by position in ``lines`` (later wins)."""
    latest: dict[str, Review] = {}
    for line in lines:
        review = line.review
        if review is None:
            continue
        current = latest.get(review.citation_id)
        # reviewed_at is validated to one fixed-width UTC format, so string order is time order
        if current is None or review.reviewed_at >= current.reviewed_at:
            latest[review.citation_id] = review
    return latest
