"""What every trace-format adapter gives ingest: the model calls of one landing file, each as a
citegate-log/1 record or a reject with its reason, tagged with the source line that holds the call.

An adapter is pure: lines in, calls out. It never guesses: a prompt rebuilt from captured messages says so
(`prompt_reconstructed`), content a tracer redacted or cut is a reject with its own reason, and a citation whose
cited text is not where a provider said it is keeps why (`location_mismatch`), which the provenance gate reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

# Reject reasons an adapter may give a call or a line (ingest_rejects.reason); docs/adapters.md lists them.
# Every reason more than one module gives is defined here, once; an adapter imports it from here.
# - a source line:
INVALID_JSON = "invalid_json"  # a source line that is not JSON (the same reason as for citegate-log/1 lines)
INVALID_UTF8 = "invalid_utf8"  # a source line that is not UTF-8 (likewise)
EMPTY_LINE = "empty_line"  # a blank source line (likewise)
NOT_OF_FORMAT = "not_of_format"  # a JSON line of a different shape than the file's detected format
# - a call: what the tracer did not keep
CONTENT_REDACTED = "content_redacted"  # the tracer replaced the prompt or a document with a placeholder
CONTENT_TRUNCATED = "content_truncated"  # the tracer cut the prompt or a document (a length limit)
CONTENT_NOT_CAPTURED = "content_not_captured"  # no prompt text at all: message content capture was off
# - a call with no retriever span/observation paired (lib/ingest/adapters/traces.py: none of its trace ended before it
#   started) and no citable block in its own request (an Anthropic exchange: no `retrieved` logged and no document
#   or search result block). Never given `retrieved: []`, which would make each of its citations a false
#   fabricated_id; a paired retriever that returned nothing is an empty retrieval, not this reject.
RETRIEVAL_NOT_PAIRED = "retrieval_not_paired"
# - a call: the same reasons ingest gives a citegate-log/1 line (lib/ingest/records.py, lib/ingest/batch.py)
PROMPT_UNDECODABLE = "prompt_undecodable"  # a request body lib/containers cannot read
MISSING_FIELD = "missing_field"  # a field the record needs (the answer model) is nowhere in the call
INVALID_TIMESTAMP = "invalid_timestamp"  # the call's (or a paired retriever's) time is unusable
INVALID_RETRIEVED = "invalid_retrieved"  # a retrieved document with no chunk id
DUPLICATE_CHUNK_ID = "duplicate_chunk_id"  # one chunk id with two different texts in a call's retrieval
# - a call whose record would pass a bound of lib/ingest/adapters/traces.py (one call's bytes, or one file's)
RECORD_TOO_LARGE = "record_too_large"
# - given by the registry (lib/ingest/adapters/__init__.py), never by an adapter:
LINE_TOO_LONG = "line_too_long"  # a source line over [ingest].max_line_bytes: never given to the adapter
ADAPTER_ERROR = "adapter_error"  # a call the adapter gave that cannot be written as a citegate-log/1 line
# An answer with no parsable citations is not an adapter reject: its record carries the raw answer text as
# `citations`, and ingest puts it in answer_rejects as for any citegate-log/1 line.


@dataclass(frozen=True)
class AdapterSettings:
    """`[adapters]` of citegate.toml."""

    surface_key: str = "surface"  # the span attribute / metadata key naming the product surface
    chunk_id_key: str = "chunk_id"  # the document metadata key holding the chunk id when the tracer logs no id
    citations_path: str = "citations"  # dotted path to the list of {chunk_id, span, claim} in the answer's JSON
    default_surface: str = "default"  # the surface of a call that names none


@dataclass(frozen=True)
class Call:
    """One model call of the file: its citegate-log/1 record (a dict of the log format's fields, plus
    `prompt_reconstructed` when true), or, when it cannot be converted, the reason and detail.

    A source line may hold several calls (an OTLP export request holds many traces), so a rejected call's reject
    row keeps `part`, the call's own spans/records as one JSON object, never its whole line; with no part, ingest
    keeps the line only when no other call is on it. `lines`: the other source lines its record was read from
    (its events, its paired retrievers), which `citegate forget` names with the call's own line."""

    line_no: int  # 1-based source line holding the call (its LLM span, generation or exchange)
    request_id: str | None
    record: dict | None
    reason: str | None = None
    detail: str | None = None
    part: str | None = None
    lines: tuple[int, ...] = ()
    files: tuple[tuple[str, int], ...] = ()  # lines of other files of the landing folder it was read from


@dataclass(frozen=True)
class EventsOfOtherFile:
    """A source line that holds no call of its own file but pieces (OTel log-record events) of calls in another
    file of the landing folder: accounted as such, never as a line that holds nothing."""

    line_no: int
    file: str


@dataclass(frozen=True)
class Partner:
    """Another file of the landing folder in the same format, as a joining adapter reads it (`partner`)."""

    name: str
    written_at: int | None  # its last change (ns since the epoch) while it is still being written; None: settled
    content: object  # what the adapter's `partner(lines)` made of it


@dataclass(frozen=True)
class Partners:
    """The landing folder's other files of a format, for an adapter that joins pieces across files
    (`convert_joined`), and the settle time that tells when a file still being written may still bring one."""

    files: tuple[Partner, ...] = ()
    settle_ns: int = 0


class WaitForPartner(Exception):
    """A call's pieces may still arrive in a partner file still being written: the file waits (the message says
    which call and which file)."""


@dataclass(frozen=True)
class LineReject:
    """A source line, or a piece of one, that holds no call and is not of the format (never dropped silently).
    `part`: the piece's own JSON when the line holds more than it (other calls); None: the whole line."""

    line_no: int
    reason: str
    detail: str
    part: str | None = None


class Adapter(Protocol):
    """What the registry (lib/ingest/adapters/__init__.py) needs of an adapter: the module's ADAPTER object (else the
    one
    object or class of the module whose `name` is the format's; a class is built without arguments) with `name`,
    `detect` and `convert`.

    Optional: `detect_head(self, head: bytes) -> bool`. Not part of this Protocol (a Protocol cannot make a method
    optional); the registry looks it up with getattr. When an adapter has it and the caller gives the file's head,
    the registry's `detect(first_line, head)` claims the file for it only when `detect(first_line)` and
    `detect_head(head)` both say yes; head is the file's first HEAD_BYTES (64 KiB) with any BOM removed. For a
    format whose first line alone can be ambiguous (a pretty-printed JSON document whose first line is `{`). An
    adapter without it is judged by its first line alone.

    Optional, for a format whose calls may take pieces from other files (otlp: log-record events written to a
    logs file of their own): `partner(self, lines) -> object`, what one file offers the others, and
    `convert_joined(self, lines, settings, partners: Partners) -> Iterator[Call | LineReject | EventsOfOtherFile]`,
    convert with those pieces; it raises WaitForPartner while a call's pieces may still be written.

    Both detectors and convert may raise: a detector that raises says no; a convert that raises fails the whole
    file (nothing of it is taken, the ledger says why), so the built-in adapters turn whatever goes wrong with one
    span, line or call into that item's reject. Reasons: the constants above."""

    name: str  # "otlp" | "openinference" | "langfuse" | "anthropic"

    def detect(self, first_line: bytes) -> bool:
        """True when the file's first line is of this format (a file holds one format only)."""
        ...

    def convert(self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings) -> Iterator[Call | LineReject]:
        """Every call of the file, in source order of the line holding it; every bad line as a LineReject.
        A source line that holds only spans (retrievers, chains) yields nothing. Lines come as (1-based number,
        raw bytes without the line end; the first without a BOM); a line over the line bound is never given."""
        ...
