"""[ingest] and [adapters] of citegate.toml: how landing files are read, and how trace-format files become
citegate-log/1 records; and what the ingest stage reads of the whole configuration (IngestSettings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from citegate_assets.lib.core.config_fields import (
    check_integer,
    check_number,
    check_string,
    checked_field,
)
from citegate_assets.lib.core.surfaces import DEFAULT_SURFACE, SurfacePolicies
from citegate_assets.lib.ingest.adapters.base import AdapterSettings
from citegate_assets.lib.ingest.profiles import Profile


@dataclass(frozen=True)
class IngestConfig:
    """[ingest]: how landing files are read."""

    settle_seconds: float = checked_field(
        300.0,
        check_number(0),
        "an unterminated last line, or a file still changing, waits until the file has been quiet this long "
        "(or citegate run --final)",
    )
    max_line_bytes: int = checked_field(
        33554432,
        check_integer(1024),
        "the longest line read (32 MiB); a longer one is a line_too_long reject, its first 64 KiB kept",
    )
    max_decompressed_bytes: int = checked_field(
        4294967296, check_integer(1024), "a .gz inflating past this (4 GiB) is a decompressed_too_large reject"
    )
    workers: int = checked_field(
        0,
        check_integer(0),
        "processes that parse and normalize batches: 0 = one per core (at most 4), 1 = none; spawned only past "
        "32 MiB of new lines",
    )
    shards: int = checked_field(
        1,
        check_integer(1),
        "processes a run's landing files are split across, by file identity; each stages its rows in the lake's "
        "_staging Delta tables and one step loads them (1 = one ingest process, no staging)",
    )


@dataclass(frozen=True)
class AdaptersConfig:
    """[adapters]: how trace-format files (docs/adapters.md) become citegate-log/1 records."""

    surface_key: str = checked_field(
        "surface", check_string(non_empty=True), "the span attribute / metadata key naming the product surface"
    )
    chunk_id_key: str = checked_field(
        "chunk_id",
        check_string(non_empty=True),
        "the document metadata key holding the chunk id when the tracer logs no id",
    )
    citations_path: str = checked_field(
        "citations",
        check_string(non_empty=True),
        "dotted path to the list of {chunk_id, span, claim} in the answer's JSON",
    )
    default_surface: str = checked_field(
        DEFAULT_SURFACE, check_string(non_empty=True), "the surface of a call that names none"
    )
    max_file_bytes: int = checked_field(
        67108864,
        check_integer(1024),
        "a trace file is converted whole (about 15x its size in memory); a larger one (64 MiB) is a "
        "trace_file_too_large reject",
    )

    def settings(self) -> AdapterSettings:
        """What the adapters are given (lib/ingest/adapters/base.py)."""
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
