"""[ingest] and [adapters] of citegate.toml: how landing files are read, and how trace-format files become
citegate-log/1 records; and what the ingest stage reads of the whole configuration (IngestSettings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .adapters.base import AdapterSettings
from .config_fields import (
    check_integer,
    check_number,
    check_string,
    checked_field,
)
from .profiles import Profile
from .surfaces import DEFAULT_SURFACE, SurfacePolicies


@dataclass(frozen=True)
class IngestConfig:
    """[ingest]: how landing files are read.

    settle_seconds (default 300): an unterminated last line of a file, or a file still changing, is
        held back until the file has not changed for this many seconds; a number >= 0.
    max_line_bytes (default 33554432, 32 MiB): the longest line read; an integer >= 1024.
    max_decompressed_bytes (default 4294967296, 4 GiB): the most bytes a single .gz file may
        decompress to; an integer >= 1024.
    workers (default 0 = one per core, at most 4): processes that parse and normalize batches while the
        ingest process writes; 1 = none. A run spawns them only past 32 MiB of new lines; an integer >= 0.
    """

    settle_seconds: float = checked_field(300.0, check_number(0))
    max_line_bytes: int = checked_field(33554432, check_integer(1024))
    max_decompressed_bytes: int = checked_field(4294967296, check_integer(1024))
    workers: int = checked_field(0, check_integer(0))


@dataclass(frozen=True)
class AdaptersConfig:
    """[adapters]: how trace-format files (README "Trace formats") become citegate-log/1 records.

    surface_key (default "surface"): the span attribute / metadata key naming the product surface.
    chunk_id_key (default "chunk_id"): the document metadata key holding the chunk id when the tracer logs no id.
    citations_path (default "citations"): dotted path to the list of {chunk_id, span, claim} in the answer's JSON.
    default_surface (default "default"): the surface of a call that names none.
    max_file_bytes (default 67108864, 64 MiB): a trace file is read whole (pairing needs every span of a
        trace), and converting it takes about 15x its size in memory; a larger one is a trace_file_too_large
        reject; an integer >= 1024.
    """

    surface_key: str = checked_field("surface", check_string(non_empty=True))
    chunk_id_key: str = checked_field("chunk_id", check_string(non_empty=True))
    citations_path: str = checked_field("citations", check_string(non_empty=True))
    default_surface: str = checked_field(DEFAULT_SURFACE, check_string(non_empty=True))
    max_file_bytes: int = checked_field(67108864, check_integer(1024))

    def settings(self) -> AdapterSettings:
        """What the adapters are given (lib/adapters/base.py)."""
        return AdapterSettings(
            surface_key=self.surface_key,
            chunk_id_key=self.chunk_id_key,
            citations_path=self.citations_path,
            default_surface=self.default_surface,
        )


class IngestSettings(SurfacePolicies, Protocol):
    """What the ingest stage reads of the configuration (Config is one): its sections, each surface's policy and the
    template profiles by name."""

    @property
    def ingest(self) -> IngestConfig: ...

    @property
    def adapters(self) -> AdaptersConfig: ...

    def profile(self, name: str) -> Profile | None: ...
