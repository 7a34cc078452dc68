"""citegate.toml: surfaces and their policy, template profiles, judge, calibration, queue, ingest, adapters, and the
review page's sessions and limits.

Every key is checked at load time, for its type and its range; an error names the file and the dotted
key (`citegate.toml: judge.concurrency = 0: expected an integer >= 1`). Unknown keys are errors too.
Booleans never count as numbers, and integer keys refuse floats.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from citegate_assets.lib.core.config_fields import (
    BadValue,
    ConfigError,
    as_table,
    build_section,
    check_integer,
    check_number,
    check_owners,
    check_string,
    checked_field,
    key_part,
    reject_unknown,
    sub_tables,
)
from citegate_assets.lib.core.folders import read_named_file
from citegate_assets.lib.core.surfaces import DEFAULT_SURFACE, SurfacePolicy
from citegate_assets.lib.ingest.profiles import BUILTIN_PROFILES, Profile, ProfileError, validate_profile
from citegate_assets.lib.ingest.settings import AdaptersConfig, IngestConfig
from citegate_assets.lib.support.judge.settings import JudgeConfig

# importers of config keep working
from citegate_assets.lib.support.judge.settings import SecondaryJudgeConfig as SecondaryJudgeConfig

# ---------------------------------------------------------------------------------------------------
# Checks: each takes (dotted key, value) and returns the value to keep, or raises BadValue naming the key.


# ---------------------------------------------------------------------------------------------------
# Sections


@dataclass(frozen=True)
class CalibrationConfig:
    """[calibration]: where hand labels live, when a support gate counts as enforced, and when it is too strict."""

    labels: str = checked_field(
        "labels",
        check_string(non_empty=True),
        "folder (or file) of JSONL/CSV hand labels, relative to the config file (without the key: "
        "<warehouse stem>.labels/ beside the warehouse)",
    )
    false_pass_threshold: float = checked_field(
        0.10,
        check_number(0, 1, low_open=True, high_open=True),
        "enforced: on own labels, the false pass rate's 95% Wilson upper bound is under this",
    )
    min_negatives: int = checked_field(
        30, check_integer(0), "... on at least this many human no/partial own labels (the surface's, else pooled)"
    )
    false_fail_threshold: float = checked_field(
        0.50,
        check_number(0, 1, low_open=True),
        "too_strict: the false fail rate (human yes, judge not yes) is over this; 1 never flags",
    )
    min_positives: int = checked_field(
        30, check_integer(0), "... measured on at least this many human yes labels (fewer: too_strict is unknown)"
    )


@dataclass(frozen=True)
class QueueConfig:
    """[queue]: owners per reason, where reviewers' decisions are logged, best-evidence effort."""

    reviews: str = checked_field(
        "data/reviews",
        check_string(non_empty=True),
        "folder of the append-only reviews log, relative to the config file (without the key: "
        "<warehouse stem>.reviews/ beside the warehouse)",
    )
    best_evidence_k: int = checked_field(
        2, check_integer(0), "other passages of the prompt judged per support failure, at most"
    )
    owners: dict = field(
        default_factory=dict,
        metadata={
            "check": check_owners,
            "doc": "[queue.owners]: reason -> owner; a reason without one goes to its surface's owner",
        },
    )


@dataclass(frozen=True)
class StorageConfig:
    """[storage]: where the large tables' Delta tables go (lib/storage/lake.py, docs/scaling.md)."""

    lake: str = checked_field(
        "",
        check_string(),
        "the lake: a folder relative to the config file, or s3://bucket/prefix (credentials from the AWS variables); "
        '"" = <warehouse stem>.lake/ beside the warehouse',
    )


@dataclass(frozen=True)
class RetentionConfig:
    """[retention]: how long prompt and chunk text is kept (lib/retention/drop_text.py, docs/retention.md)."""

    text_days: int = checked_field(
        0,
        check_integer(0),
        "the nightly run drops the prompt, chunk, citation and answer text of days older than this (UTC), keeping "
        "hashes, offsets, verdicts and metrics; 0 = keep text forever",
    )


@dataclass(frozen=True)
class ReviewPageConfig:
    """[review_page]: `citegate serve`'s sessions and connection limits (docs/review-web.md)."""

    session_idle_minutes: float = checked_field(
        120.0, check_number(0, low_open=True), "a signed-in session unused this long ends (minutes)"
    )
    session_max_hours: float = checked_field(
        12.0, check_number(0, low_open=True), "a session ends this long after sign-in, used or not (hours)"
    )
    max_connections: int = checked_field(
        256,
        check_integer(1),
        "open connections at most (never more than the open-file limit leaves); past it a new connection closes "
        "the one that has waited longest for a request",
    )
    head_timeout_s: float = checked_field(
        10.0, check_number(0, low_open=True), "a request's head must arrive within this (s)"
    )
    keep_alive_s: int = checked_field(5, check_integer(1), "an idle kept-alive connection is closed after this (s)")
    body_timeout_s: float = checked_field(
        30.0,
        check_number(0, low_open=True),
        "a request's body must arrive within this (s); bodies over 64 KB are refused",
    )


@dataclass(frozen=True)
class Config:
    path: str | None
    surfaces: dict[str, SurfacePolicy]
    templates: dict[str, Profile] = field(default_factory=dict)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    queue: QueueConfig = field(default_factory=QueueConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    adapters: AdaptersConfig = field(default_factory=AdaptersConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    review_page: ReviewPageConfig = field(default_factory=ReviewPageConfig)

    def surface(self, name: str) -> SurfacePolicy:
        """The surface's policy; any surface not listed gets [surfaces.default]."""
        return self.surfaces.get(name) or self.surfaces[DEFAULT_SURFACE]

    def profile(self, name: str) -> Profile | None:
        return self.templates.get(name)


_SECTIONS = {
    "judge": JudgeConfig,
    "calibration": CalibrationConfig,
    "queue": QueueConfig,
    "ingest": IngestConfig,
    "adapters": AdaptersConfig,
    "storage": StorageConfig,
    "retention": RetentionConfig,
    "review_page": ReviewPageConfig,
}
_TOP_KEYS = {"surfaces", "templates", *_SECTIONS}
_PROFILE_KEYS = {f.name for f in fields(Profile)} - {"name", "_compiled"}
_PROFILE_REQUIRED = ("context_start", "chunk_header")


def config_path(explicit: str | os.PathLike | None = None) -> Path | None:
    """--config, else CITEGATE_CONFIG, else ./citegate.toml if present, else built-in defaults."""
    if explicit:
        return Path(explicit)
    if os.environ.get("CITEGATE_CONFIG"):
        return Path(os.environ["CITEGATE_CONFIG"])
    local = Path("citegate.toml")
    return local if local.exists() else None


def load_config(path: str | os.PathLike | None = None) -> Config:
    resolved = config_path(path)
    if resolved is None:
        return parse_config({}, None)
    try:
        raw = tomllib.loads(read_named_file(resolved).decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{resolved}: config file not found") from None
    except IsADirectoryError as exc:  # a folder, a FIFO (never opened to block), a socket...
        raise ConfigError(f"{exc}, not a config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{resolved}: {exc}") from None
    return parse_config(raw, str(resolved))


def parse_config(raw: dict, path: str | None) -> Config:
    try:
        return _parse(raw, path)
    except BadValue as exc:
        raise ConfigError(f"{path or 'citegate.toml'}: {exc}") from None


def _parse(raw: dict, path: str | None) -> Config:
    reject_unknown(raw, _TOP_KEYS, "")
    templates = dict(BUILTIN_PROFILES)
    for name, table in sub_tables(raw.get("templates", {}), "templates"):
        templates[name] = _profile(name, table)
    surfaces: dict[str, SurfacePolicy] = {}
    for name, table in sub_tables(raw.get("surfaces", {}), "surfaces"):
        key = f"surfaces.{key_part(name)}"
        policy = build_section(SurfacePolicy, table, key, name=name)
        if policy.template not in templates:
            raise BadValue(
                f"{key}.template = {policy.template!r}: no such template "
                f"(built-in: {', '.join(BUILTIN_PROFILES)}; or define [templates.{policy.template}])"
            )
        surfaces[name] = policy
    surfaces.setdefault(DEFAULT_SURFACE, SurfacePolicy(name=DEFAULT_SURFACE))
    sections = {key: build_section(cls, as_table(key, raw.get(key, {})), key) for key, cls in _SECTIONS.items()}
    return Config(path=path, surfaces=surfaces, templates=templates, **sections)


def _profile(name: str, table: dict) -> Profile:
    key = f"templates.{key_part(name)}"
    reject_unknown(table, _PROFILE_KEYS, key)
    for required in _PROFILE_REQUIRED:
        if required not in table:
            raise BadValue(f"[{key}] is missing required key '{required}'")
    for field_name, value in table.items():
        check_string()(f"{key}.{field_name}", value)  # every profile field is a string (a regex, a choice or text)
    profile = Profile(name=name, **table)
    try:
        validate_profile(profile, key)
    except ProfileError as exc:
        raise BadValue(str(exc)) from None
    return profile
