"""Validation of one citegate-log/1 line (docs/log-format.md; SPEC section 2). Pure: a line in, a record or a
reject out."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone

import msgspec

from citegate_assets.lib.core.lines import RAW_KEEP_BYTES, Line
from citegate_assets.lib.ingest.containers import ENCODINGS

# Daily partitions start here; an earlier logged_at has no partition and is rejected, not lost.
EARLIEST_DAY = date(2020, 1, 1)
FUTURE_SLACK = timedelta(days=1)

BOM = b"\xef\xbb\xbf"
REQUIRED = {"request_id": str, "logged_at": str, "surface": str, "answer_model": str, "prompt": str}
MAX_RANK = 2**31 - 1
# where a retrieved text came from: the retriever (absent, the default) or, when a tracer logged only the chunk's
# id, the prompt itself (an adapter found it there: a chunk cut before sending then looks whole)
TEXT_SOURCES = (None, "retriever", "prompt")
# RFC 3339 date-time (section 5.6): "T"/"t" (or a space), seconds required, "Z"/"z" or ±hh:mm
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?P<tz>[Zz]|[+-]\d{2}:\d{2})?")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89abcdefABCDEF]")  # the same ASCII in UTF-8: twice as fast
_JSON = msgspec.json.Decoder()
# nesting shallower than this: not deep enough for json.loads to refuse (its limit: ~1,000 less the stack)
FAST_PATH_MAX_DEPTH = 512


@dataclass(frozen=True)
class Reject:
    reason: str
    detail: str
    request_id: str | None = None  # the line's request id, when it had one a valid record could have


@dataclass
class Record:
    request_id: str
    logged_at: datetime
    surface: str
    answer_model: str
    prompt: str
    prompt_encoding: str
    template: str | None
    retrieved: list[dict]
    answer: str | None
    citations: list[dict] | None  # None when the answer is rejected; empty: the answer's markers are read
    answer_reject: Reject | None
    citations_value: object  # the citations field as logged: a string, or what its JSON held
    prompt_reconstructed: bool = False  # an adapter rebuilt the prompt from captured messages (not the bytes sent)
    retrieved_left_out: str | None = None  # JSON [{chunk_id, why}]: chunks a tracer named but gave no text for
    _prompt_sha256: str | None = field(default=None, repr=False, compare=False)

    @property
    def prompt_sha256(self) -> str:
        """sha256 of the prompt's UTF-8, worked out when first asked: once polars holds the prompt, the string
        keeps its UTF-8 and encoding it is a copy (a non-Latin-1 prompt's encoding otherwise costs as much again)."""
        if self._prompt_sha256 is None:
            self._prompt_sha256 = hashlib.sha256(self.prompt.encode("utf-8", "surrogatepass")).hexdigest()
        return self._prompt_sha256

    @property
    def day(self) -> date:
        return self.logged_at.date()

    @property
    def citations_raw(self) -> str:
        """The citations field as text (an answer reject keeps it), serialized only for the few that need it."""
        value = self.citations_value
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def parse_raw_line(line: Line, now: datetime, max_line_bytes: int) -> tuple[Record | Reject, str]:
    """A line as read from a landing file: its record or reject, and its text (what a reject row keeps of it)."""
    result, text = read_raw_line(line, now, max_line_bytes)
    return result, valid_line_text(line) if text is None else text


def read_raw_line(line: Line, now: datetime, max_line_bytes: int) -> tuple[Record | Reject, str | None]:
    """parse_raw_line without decoding the text of a line that is valid JSON (None: valid_line_text gives it, for
    the few reject rows that keep it). Such a line is decoded by msgspec, ~2x faster than json: what msgspec reads
    is UTF-8 without a NUL byte or a lone surrogate escape, and gives the value json.loads gives; any line it refuses
    takes json's path, so its reject names the fault as before. So does a line nested deeply (_shallow): json refuses
    deep nesting at a depth that depends on the caller's stack, and msgspec at another."""
    if not line.too_long:
        try:
            obj = _JSON.decode(_body(line))
        except Exception:  # noqa: BLE001 - whatever msgspec refuses, json's path below decides and words it
            pass
        else:
            if _shallow(obj):
                return _parse_object(obj, now), None
    return _parse_checked(line, now, max_line_bytes)


def _shallow(obj: object) -> bool:
    """No array or object nested FAST_PATH_MAX_DEPTH deep: json.loads takes it too, at any stack depth. Walked on
    the decoded value (a record holds a few dozen containers), not by counting the brackets of the line's bytes."""
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        items = value.values() if type(value) is dict else value if type(value) is list else ()
        for item in items:
            if type(item) is dict or type(item) is list:
                if depth + 1 >= FAST_PATH_MAX_DEPTH:
                    return False
                stack.append((item, depth + 1))
    return True


def valid_line_text(line: Line) -> str:
    """What parse_raw_line gives as the text of a line that held a valid record (a reject row keeps it)."""
    return _body(line).decode("utf-8")


def _body(line: Line) -> bytes:
    raw = line.raw
    if line.no == 1 and raw.startswith(BOM):
        return raw[len(BOM) :]  # a UTF-8 byte order mark is an encoding artifact, not content
    return raw


def _parse_checked(line: Line, now: datetime, max_line_bytes: int) -> tuple[Record | Reject, str]:
    raw = _body(line)
    if line.too_long:
        return Reject(
            "line_too_long",
            f"line of {line.length} bytes exceeds {max_line_bytes}; raw_line keeps the first {RAW_KEEP_BYTES}",
        ), raw[:RAW_KEEP_BYTES].decode("utf-8", "backslashreplace")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Reject("invalid_utf8", f"not UTF-8 at byte {exc.start}"), raw.decode("utf-8", "backslashreplace")
    if b"\x00" in raw:  # UTF-8 holds the byte 0 only as NUL: a bytes search is ~10x faster than the text's
        return Reject("nul_byte", f"NUL byte at character {text.index(chr(0))}"), text.replace("\x00", "\\x00")
    return _parse_line(text, now, raw), text


def parse_line(line: str, now: datetime) -> Record | Reject:
    return _parse_line(line, now, None)


def _parse_line(line: str, now: datetime, raw: bytes | None) -> Record | Reject:
    """raw: the line's UTF-8 bytes when the caller has them (searched instead of the text)."""
    if not line.strip():
        return Reject("empty_line", "blank line")
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        return Reject("invalid_json", str(exc)[:200])
    if isinstance(obj, dict):
        escaped = _SURROGATE_ESCAPE.search(line) if raw is None else _SURROGATE_ESCAPE_BYTES.search(raw)
        if escaped and _has_lone_surrogate(obj):
            why = "a \\uD800-\\uDFFF escape that is not half of a surrogate pair: not text"
            return Reject("invalid_unicode", why, request_id_of(obj))
    return _parse_object(obj, now)


def _parse_object(obj: object, now: datetime) -> Record | Reject:
    if not isinstance(obj, dict):
        return Reject("not_an_object", f"line holds a JSON {type(obj).__name__}, not an object")
    return parse_record(obj, now)


def _has_lone_surrogate(obj) -> bool:
    """JSON lets "\\ud800" through, but it is no character: nothing downstream can store it."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def request_id_of(obj: dict) -> str | None:
    """The request id a rejected line names, when a valid record could have it (a string, not blank, that is text):
    its reject row carries it, so `citegate forget` finds the rejected copy. Anything else names no request."""
    value = obj.get("request_id")
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no column can hold it
        return None
    return value


def parse_record(obj: dict, now: datetime) -> Record | Reject:
    """A record, or why not (with the request id the object names, if any)."""
    result = _parse_record(obj, now)
    return replace(result, request_id=request_id_of(obj)) if isinstance(result, Reject) else result


def _parse_record(obj: dict, now: datetime) -> Record | Reject:
    for key, typ in REQUIRED.items():
        if key not in obj or obj[key] is None:
            return Reject("missing_field", f"required field '{key}' is missing or null")
        if not isinstance(obj[key], typ):
            return Reject("wrong_type", f"field '{key}' is {type(obj[key]).__name__}, expected string")
    if obj.get("retrieved") is None:
        return Reject("missing_field", "required field 'retrieved' is missing or null")
    if not obj["request_id"].strip():
        return Reject("empty_request_id", "field 'request_id' is empty")
    logged_at = _parse_timestamp(obj["logged_at"])
    if isinstance(logged_at, Reject):
        return logged_at
    if logged_at.date() < EARLIEST_DAY or logged_at > now + FUTURE_SLACK:
        return Reject(
            "timestamp_out_of_range", f"logged_at {obj['logged_at']!r} is before {EARLIEST_DAY} or in the future"
        )
    encoding = obj.get("prompt_encoding")
    if encoding is None:
        encoding = "text"
    if not isinstance(encoding, str):
        return Reject("wrong_type", f"field 'prompt_encoding' is {type(encoding).__name__}, expected string")
    if encoding not in ENCODINGS:
        return Reject(
            "unknown_prompt_encoding", f"prompt_encoding {encoding!r}; expected one of {', '.join(ENCODINGS)}"
        )
    template = obj.get("template")
    if template is not None and not isinstance(template, str):
        return Reject("wrong_type", "field 'template' is not a string")
    answer = obj.get("answer")
    if answer is not None and not isinstance(answer, str):
        return Reject("wrong_type", "field 'answer' is not a string")
    reconstructed = obj.get("prompt_reconstructed")
    if reconstructed is not None and not isinstance(reconstructed, bool):
        return Reject("wrong_type", f"field 'prompt_reconstructed' is {type(reconstructed).__name__}, expected boolean")
    retrieved = parse_retrieved(obj["retrieved"])
    if isinstance(retrieved, Reject):
        return retrieved
    left_out = _parse_left_out(obj.get("retrieved_left_out"))
    if isinstance(left_out, Reject):
        return left_out
    # no citations (absent, null or empty): the answer's inline markers are read at ingest (lib/ingest/markers.py)
    raw_citations = obj.get("citations")
    citations = [] if raw_citations is None else parse_citations(raw_citations)
    return Record(
        request_id=obj["request_id"],
        logged_at=logged_at,
        surface=obj["surface"],
        answer_model=obj["answer_model"],
        prompt=obj["prompt"],
        prompt_encoding=encoding,
        template=template or None,
        retrieved=retrieved,
        answer=answer,
        citations=None if isinstance(citations, Reject) else citations,
        answer_reject=citations if isinstance(citations, Reject) else None,
        citations_value=raw_citations,
        prompt_reconstructed=bool(reconstructed),
        retrieved_left_out=left_out,
    )


def _parse_left_out(value: object) -> str | None | Reject:
    """`retrieved_left_out`: [{chunk_id, why}], kept as JSON text on the prompt row (none: None)."""
    if value is None or value == []:
        return None
    ok = isinstance(value, list) and all(
        isinstance(e, dict) and isinstance(e.get("chunk_id"), str) and isinstance(e.get("why"), str) for e in value
    )
    if not ok:
        return Reject("wrong_type", "field 'retrieved_left_out' is not an array of {chunk_id, why} strings")
    return json.dumps(value, ensure_ascii=False)


def _parse_timestamp(value: str) -> datetime | Reject:
    match = _RFC3339.fullmatch(value)
    if match is None:
        return Reject(
            "invalid_timestamp",
            f"logged_at {value!r} is not an RFC 3339 timestamp (YYYY-MM-DDTHH:MM:SS[.frac]Z|±HH:MM)",
        )
    if match["tz"] is None:
        return Reject("timestamp_without_timezone", f"logged_at {value!r} has no UTC offset; its day is ambiguous")
    try:
        parsed = datetime.fromisoformat(value[:10] + "T" + value[11:].upper())
        return parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError) as exc:
        return Reject(
            "invalid_timestamp"
            if isinstance(exc, ValueError) and "range" not in str(exc)
            else "timestamp_out_of_range",
            f"logged_at {value!r}: {exc}",
        )


def parse_retrieved(value: object) -> list[dict] | Reject:
    if not isinstance(value, list):
        return Reject("wrong_type", f"field 'retrieved' is {type(value).__name__}, expected array")
    seen: set[str] = set()
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            return Reject("invalid_retrieved", f"retrieved[{i}] is not an object")
        chunk_id, text = entry.get("chunk_id"), entry.get("text")
        if not isinstance(chunk_id, str) or not chunk_id.strip():
            return Reject("invalid_retrieved", f"retrieved[{i}].chunk_id is missing, empty or not a string")
        if not isinstance(text, str):
            return Reject("invalid_retrieved", f"retrieved[{i}].text is missing or not a string")
        rank = entry.get("rank", i + 1)
        if isinstance(rank, bool) or not isinstance(rank, int):
            return Reject("invalid_retrieved", f"retrieved[{i}].rank is not an integer")
        if not 0 <= rank <= MAX_RANK:
            return Reject("invalid_retrieved", f"retrieved[{i}].rank {rank} is outside 0..{MAX_RANK}")
        for opt in ("doc_id", "chunking"):
            if entry.get(opt) is not None and not isinstance(entry[opt], str):
                return Reject("invalid_retrieved", f"retrieved[{i}].{opt} is not a string")
        if entry.get("text_source") not in TEXT_SOURCES:
            return Reject(
                "invalid_retrieved", f"retrieved[{i}].text_source is not one of {', '.join(TEXT_SOURCES[1:])}"
            )
        if chunk_id.strip() in seen:
            return Reject("duplicate_chunk_id", f"retrieved[{i}].chunk_id {chunk_id!r} appears twice in this call")
        seen.add(chunk_id.strip())
        out.append(
            {
                "chunk_id": chunk_id.strip(),
                "rank": rank,
                "text": text,
                "doc_id": entry.get("doc_id"),
                "chunking": entry.get("chunking"),
                "text_source": entry.get("text_source"),
            }
        )
    return out


# where a citation came from (citations.origin): the log's citations field, an inline marker of the answer read at
# ingest, or a provider's own citation structure (an adapter's, e.g. Anthropic's)
STRUCTURED, MARKER, NATIVE = "structured", "marker", "native"
LOGGED_ORIGINS = (STRUCTURED, NATIVE)


def parse_citations(value: object) -> list[dict] | Reject:
    """Structured citations, or the answer-level reject reason (the prompt is still stored). A citation without a
    span (absent or null) is span-less: provenance anchors its claim in the cited chunk (lib/ingest/anchors.py)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:
            return Reject("citations_not_json", f"citations string is not JSON: {str(exc)[:200]}")
    if not isinstance(value, list):
        return Reject("citations_not_list", f"citations is a {type(value).__name__}, not a list")
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            return Reject("citation_not_object", f"citations[{i}] is not an object")
        for key in ("chunk_id", "span", "claim"):
            if key == "span" and entry.get("span") is None:
                continue  # span-less
            if key not in entry or entry[key] is None:
                return Reject("citation_missing_key", f"citations[{i}] has no '{key}'")
            if not isinstance(entry[key], str):
                return Reject("citation_wrong_type", f"citations[{i}].{key} is not a string")
            if not entry[key].strip():
                return Reject("citation_empty_field", f"citations[{i}].{key} is empty")
        mismatch = entry.get("location_mismatch")
        if mismatch is not None and not isinstance(mismatch, str):
            return Reject("citation_wrong_type", f"citations[{i}].location_mismatch is not a string")
        origin = entry.get("origin")
        if origin is not None and origin not in LOGGED_ORIGINS:
            return Reject("citation_wrong_type", f"citations[{i}].origin is not one of {', '.join(LOGGED_ORIGINS)}")
        out.append(
            {
                "chunk_id": entry["chunk_id"].strip(),
                "span": entry.get("span"),
                "claim": entry["claim"],
                "location_mismatch": mismatch,
                "origin": origin or STRUCTURED,
            }
        )
    return out
