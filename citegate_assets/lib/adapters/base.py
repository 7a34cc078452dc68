"""What every trace-format adapter gives ingest (issue 14): the model calls of one landing file, each as a
citegate-log/1 record or a reject with its reason, tagged with the source line that holds the call.

An adapter is pure: lines in, calls out. It never guesses: a prompt rebuilt from captured messages says so
(`prompt_reconstructed`), content a tracer redacted or cut is a reject with its own reason, and a citation whose
cited text is not where a provider said it is keeps why (`location_mismatch`), which the provenance gate reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

# Reject reasons an adapter may give a call or a line (ingest_rejects.reason); README "Trace formats" lists them.
INVALID_JSON = "invalid_json"  # a source line that is not JSON (the same reason as for citegate-log/1 lines)
NOT_OF_FORMAT = "not_of_format"  # a JSON line of a different shape than the file's detected format
CONTENT_REDACTED = "content_redacted"  # the tracer replaced the prompt or a document with a placeholder
CONTENT_TRUNCATED = "content_truncated"  # the tracer cut the prompt or a document (a length limit)
CONTENT_NOT_CAPTURED = "content_not_captured"  # no prompt text at all: message content capture was off
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
    `prompt_reconstructed` when true), or, when it cannot be converted, the reason and detail."""

    line_no: int  # 1-based source line holding the call (its LLM span, generation or exchange)
    request_id: str | None
    record: dict | None
    reason: str | None = None
    detail: str | None = None


@dataclass(frozen=True)
class LineReject:
    """A source line that holds no call and is not of the format (a bad line, never dropped silently)."""

    line_no: int
    reason: str
    detail: str


class Adapter(Protocol):
    name: str  # "otlp" | "openinference" | "langfuse" | "anthropic"

    def detect(self, first_line: bytes) -> bool:
        """True when the file's first line is of this format (a file holds one format only)."""
        ...

    def convert(self, lines: Iterable[tuple[int, bytes]], settings: AdapterSettings) -> Iterator[Call | LineReject]:
        """Every call of the file, in source order of the line holding it; every bad line as a LineReject.
        A source line that holds only spans (retrievers, chains) yields nothing."""
        ...
