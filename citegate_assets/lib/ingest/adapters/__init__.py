"""Trace-format adapters (docs/adapters.md): the registry, detection of a landing file's format by
its first line, and the conversion of a whole file with its accounting.

The four adapters (otlp, openinference, langfuse, anthropic) are imported lazily, by name: a module that is
missing or fails to import leaves the others working (`unavailable()` says why). A citegate-log/1 line is not an
adapter format: `detect` returns None for it, and such a file is read exactly as before adapters existed.

The accounting of a converted file (`Conversion`): every item is a call or a line reject, so
    calls converted = calls ingested + calls rejected (the items fed to ingest),
and every source line holds calls, holds events of calls in another file (an OTel logs file), holds no call (only
spans, or nothing), or is a line reject.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from citegate_assets.lib.core.lines import RAW_KEEP_BYTES, Line, ReadState, Stream, open_stream, read_lines
from citegate_assets.lib.ingest.adapters.base import (
    ADAPTER_ERROR,
    LINE_TOO_LONG,
    Adapter,
    AdapterSettings,
    Call,
    EventsOfOtherFile,
    LineReject,
    Partner,
    Partners,
    WaitForPartner,
)

__all__ = [
    "ADAPTER_ERROR",
    "FORMATS",
    "LINE_TOO_LONG",
    "Adapter",
    "AdapterSettings",
    "Call",
    "Conversion",
    "EventsOfOtherFile",
    "LineReject",
    "Partner",
    "Partners",
    "TraceFileTooLarge",
    "adapter",
    "convert_file",
    "convert_lines",
    "detect",
    "detect_lines",
    "is_citegate_log_line",
    "register",
    "registry",
    "unavailable",
    "unregister",
    "whole_document",
]

FORMATS = ("otlp", "openinference", "langfuse", "anthropic")  # also the detection order
BOM = b"\xef\xbb\xbf"
HEAD_BYTES = 64 * 1024  # what `detect_head` sees of a file

_loaded: dict[str, Adapter] | None = None
_unavailable: dict[str, str] = {}
_extra: dict[str, Adapter] = {}  # registered at run time (tests, extensions); they come before the built-in ones


class TraceFileTooLarge(Exception):
    """A trace file is read whole (pairing needs every span of a trace); past the bound it is not read."""


def _find(module: object, name: str) -> Adapter | None:
    """The module's adapter: its ADAPTER (or adapter) object, else the one object or class named `name` with
    detect and convert; a class is instantiated without arguments."""
    candidates = [getattr(module, attr) for attr in ("ADAPTER", "adapter") if hasattr(module, attr)]
    candidates += [
        value
        for value in vars(module).values()
        if getattr(value, "__module__", None) == getattr(module, "__name__", None)
    ]
    for value in candidates:
        if getattr(value, "name", None) != name:
            continue
        if not (callable(getattr(value, "detect", None)) and callable(getattr(value, "convert", None))):
            continue
        return value() if isinstance(value, type) else value
    return None


def _load() -> dict[str, Adapter]:
    global _loaded
    if _loaded is None:
        loaded: dict[str, Adapter] = {}
        for name in FORMATS:
            try:
                module = importlib.import_module(f"{__name__}.{name}")
                found = _find(module, name)
            except Exception as exc:  # noqa: BLE001 — not written yet, or broken: the other formats still work
                _unavailable[name] = f"{type(exc).__name__}: {exc}"
                continue
            if found is None:
                _unavailable[name] = f"{module.__name__} has no adapter named {name!r} (detect, convert)"
            else:
                loaded[name] = found
        _loaded = loaded
    return _loaded


def registry() -> dict[str, Adapter]:
    """name -> adapter, in detection order: registered ones first, then the built-in formats that import."""
    return {**_extra, **{k: v for k, v in _load().items() if k not in _extra}}


def unavailable() -> dict[str, str]:
    """Built-in formats whose module could not be used, and why."""
    _load()
    return dict(_unavailable)


def register(item: Adapter) -> None:
    _extra[item.name] = item


def unregister(name: str) -> None:
    _extra.pop(name, None)


def adapter(name: str) -> Adapter:
    """The adapter of this format, or a ValueError naming the formats there are (and why one is missing)."""
    found = registry().get(name)
    if found is not None:
        return found
    why = unavailable().get(name)
    known = ", ".join(registry()) or "none"
    raise ValueError(f"no adapter for format {name!r}" + (f" ({why})" if why else "") + f"; available: {known}")


def is_citegate_log_line(first_line: bytes) -> bool:
    """A JSON object with citegate-log/1's `prompt` and `request_id`: read as a log line, never converted."""
    try:
        obj = json.loads(first_line.removeprefix(BOM))
    except (ValueError, RecursionError):
        return False
    return isinstance(obj, dict) and "prompt" in obj and "request_id" in obj


def detect(first_line: bytes, head: bytes | None = None) -> Adapter | None:
    """The adapter whose format the file's first line is in (the first that says so, in registry order), or
    None: a citegate-log/1 file, or a file of no known format. An adapter whose detect raises says no.

    head: the file's first HEAD_BYTES; an adapter with a `detect_head(head)` (one whose first line alone can be
    ambiguous, e.g. a pretty-printed document's `{`) must then say yes to it too."""
    line = first_line.removeprefix(BOM)
    if not line.strip() or is_citegate_log_line(line):
        return None
    start = head.removeprefix(BOM) if head is not None else None
    for item in registry().values():
        try:
            if not item.detect(line):
                continue
            confirm = getattr(item, "detect_head", None)
            if start is None or confirm is None or confirm(start):
                return item
        except Exception:  # noqa: BLE001 — a detector that cannot read the line does not claim it
            continue
    return None


def read_head(stream: Stream, nbytes: int = HEAD_BYTES) -> bytes:
    """The first nbytes of a stream (fewer at its end)."""
    head = bytearray()
    while len(head) < nbytes:
        block = stream.read(nbytes - len(head))
        if not block:
            break
        head += block
    return bytes(head)


def head_of(lines: list[Line]) -> bytes:
    """The first HEAD_BYTES of a file read as lines (its line ends as LF)."""
    out = bytearray()
    for line in lines:
        if len(out) >= HEAD_BYTES:
            break
        out += line.raw + b"\n"
    return bytes(out[:HEAD_BYTES])


def is_json_value(raw: bytes) -> bool:
    try:
        json.loads(raw.removeprefix(BOM))
    except (ValueError, RecursionError):
        return False
    return True


@dataclass
class Conversion:
    """What an adapter made of one whole file: its items (calls and line rejects, by source line), the accounting,
    or `error` when the adapter failed (then nothing of the file is taken)."""

    format: str
    items: list[Call | LineReject] = field(default_factory=list)
    source_lines: int = 0
    lines_with_calls: int = 0
    lines_without_calls: int = 0  # only spans (retrievers, chains), or nothing at all
    lines_rejected: int = 0  # a LineReject and no call
    # file name -> lines that hold no call of this file but events of calls in that file (otlp: a logs file)
    lines_for_others: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    waiting: str | None = None  # the file waits for a partner file still being written: why

    @property
    def calls(self) -> int:
        return sum(isinstance(item, Call) for item in self.items)

    def describe(self) -> str:
        """One line for the ledger's detail: the source lines and what they held."""
        others = "".join(f"{n} hold events of calls in {name}, " for name, n in sorted(self.lines_for_others.items()))
        return (
            f"{self.format}: {self.source_lines} source lines ({self.lines_with_calls} hold calls, {others}"
            f"{self.lines_without_calls} hold no call, {self.lines_rejected} rejected); {self.calls} calls"
        )


def convert_lines(
    item: Adapter, lines: list[Line], settings: AdapterSettings, partners: Partners | None = None
) -> Conversion:
    """Convert a whole file's lines (as lib/lines.read_lines gives them). A line over the line bound is a
    line_too_long reject and is not given to the adapter. The adapter's items come back in source-line order
    (a stable sort: ingest skips the items a file already gave, by count, when it grows).

    partners: the landing folder's other files of the format, for an adapter that joins across files
    (`convert_joined`); `waiting` then says why the file must wait for one still being written."""
    conv = Conversion(item.name, source_lines=len(lines))
    numbers = {line.no for line in lines}
    own: list[Call | LineReject] = [
        LineReject(line.no, LINE_TOO_LONG, f"line of {line.length} bytes exceeds the line bound; not converted")
        for line in lines
        if line.too_long
    ]
    given = [(line.no, line.raw.removeprefix(BOM) if line.no == 1 else line.raw) for line in lines if not line.too_long]
    joined = getattr(item, "convert_joined", None)
    try:
        if partners is not None and callable(joined):
            out = list(joined(iter(given), settings, partners))
        else:
            out = list(item.convert(iter(given), settings))
    except WaitForPartner as exc:
        conv.waiting = str(exc)[:500]
        return conv
    except Exception as exc:  # noqa: BLE001 — a failing adapter fails the file, loudly, never a part of it
        conv.error = f"the {item.name} adapter failed: {type(exc).__name__}: {exc}"[:500]
        return conv
    notes = [x for x in out if isinstance(x, EventsOfOtherFile)]
    out = [x for x in out if not isinstance(x, EventsOfOtherFile)]
    for x in out:
        problem = None
        if not isinstance(x, (Call, LineReject)):
            problem = f"gave a {type(x).__name__}, not a Call or LineReject"
        elif x.line_no not in numbers:
            problem = f"gave an item for line {x.line_no!r}, which the file does not have"
        elif isinstance(x, Call) and x.record is None and x.reason is None:
            problem = f"gave a call on line {x.line_no} with neither a record nor a reason"
        if problem:
            conv.error = f"the {item.name} adapter {problem}"
            return conv
    conv.items = sorted([*own, *out], key=lambda x: x.line_no)
    with_calls = {x.line_no for x in conv.items if isinstance(x, Call)}
    rejected = {x.line_no for x in conv.items if isinstance(x, LineReject)} - with_calls
    conv.lines_with_calls, conv.lines_rejected = len(with_calls), len(rejected)
    owner: dict[int, str] = {}
    for note in notes:
        if note.line_no in numbers and note.line_no not in with_calls and note.line_no not in rejected:
            owner.setdefault(note.line_no, note.file)
    for name in owner.values():
        conv.lines_for_others[name] = conv.lines_for_others.get(name, 0) + 1
    conv.lines_without_calls = conv.source_lines - conv.lines_with_calls - conv.lines_rejected - len(owner)
    return conv


def record_line(call: Call) -> tuple[bytes | None, str | None]:
    """A call's record as one citegate-log/1 line (UTF-8 JSON), or why it cannot be one."""
    try:
        try:
            text = json.dumps(call.record, ensure_ascii=False, allow_nan=False)
            return text.encode("utf-8"), None
        except UnicodeEncodeError:  # a lone surrogate: escaped, so records.py rejects it as invalid_unicode
            return json.dumps(call.record, allow_nan=False).encode("ascii"), None
    except (TypeError, ValueError, RecursionError) as exc:
        return None, f"the record is not JSON-serializable: {type(exc).__name__}: {exc}"[:300]


def read_trace_lines(
    path: Path, *, max_file_bytes: int, max_line_bytes: int, max_inflated_bytes: int | None = None
) -> list[Line]:
    """Every line of a trace file (gzipped when its name ends in .gz), read whole with its last line; raises
    TraceFileTooLarge past max_file_bytes of content, lines.DecompressedTooLarge, or one of lines.READ_ERRORS."""
    lines: list[Line] = []
    total = 0
    with open(path, "rb") as fh:
        compressed = path.name.endswith(".gz")
        for line in read_lines(
            open_stream(fh, compressed),
            ReadState(),
            max_line_bytes=max_line_bytes,
            max_inflated_bytes=max_inflated_bytes if compressed else None,
            final=True,
        ):
            total += line.length
            if total > max_file_bytes:
                raise TraceFileTooLarge(
                    f"holds more than {max_file_bytes:,} bytes (the bound is [adapters].max_file_bytes)"
                )
            lines.append(line)
    return lines


def convert_file(
    path: str | Path,
    settings: AdapterSettings,
    *,
    format: str | None = None,
    max_file_bytes: int,
    max_line_bytes: int,
    max_inflated_bytes: int | None = None,
) -> Conversion:
    """Convert one trace file as ingest would (`citegate import`): with the named format's adapter, else the
    detected one (a ValueError when none is, or when the file is not of the named format)."""
    path = Path(path)
    lines = read_trace_lines(
        path, max_file_bytes=max_file_bytes, max_line_bytes=max_line_bytes, max_inflated_bytes=max_inflated_bytes
    )
    found, lines = detect_lines(lines)
    if format is None:
        if found is None:
            raise ValueError(f"{path.name}: it is in none of the trace formats ({', '.join(registry())})")
        return convert_lines(found, lines, settings)
    chosen = adapter(format)
    if found is None or found.name != chosen.name:
        seen = f"it looks like {found.name}" if found is not None else "no trace format recognises it"
        raise ValueError(f"{path.name}: it is not {format} ({seen}); nothing was converted")
    return convert_lines(chosen, lines, settings)


def detect_lines(lines: list[Line]) -> tuple[Adapter | None, list[Line]]:
    """A whole file's format, as ingest decides it: by its first line (and head), else, when the file is one JSON
    document over several lines that no format claims as it stands, by that document as one line (then returned
    as the file's only line)."""
    if not lines or lines[0].too_long:
        return None, lines
    found = detect(lines[0].raw, head_of(lines))
    if found is None and (doc := whole_document(lines)) is not None:
        found = detect(doc.raw, doc.raw[:HEAD_BYTES])
        if found is not None:
            return found, [doc]
    return found, lines


def whole_document(lines: list[Line]) -> Line | None:
    """A file of several lines that together are one JSON document (a pretty-printed API page): that document as
    one compact line, numbered 1; None otherwise (a single line is already one, and a bad one stays a bad line)."""
    if len(lines) < 2 or any(line.too_long for line in lines):
        return None
    try:
        value = json.loads(b"\n".join(line.raw for line in lines).removeprefix(BOM))
    except (ValueError, RecursionError):
        return None
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return Line(1, raw, lines[-1].end, len(raw))


def source_text(raw: bytes) -> str:
    """A source line as a reject row keeps it (bounded, never raising)."""
    return raw[:RAW_KEEP_BYTES].decode("utf-8", "backslashreplace")
