"""citegate.toml: surfaces and their policy, template profiles, judge, calibration, queue, ingest, adapters, and the
review page's sessions and limits.

Every key is checked at load time, for its type and its range; an error names the file and the dotted
key (`citegate.toml: judge.concurrency = 0: expected an integer >= 1`). Unknown keys are errors too.
Booleans never count as numbers, and integer keys refuse floats.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TypeGuard

from .adapters.base import AdapterSettings
from .folders import read_named_file
from .profiles import BUILTIN_PROFILES, Profile, ProfileError, validate_profile
from .reasons import QUEUE_REASONS

STAKES = ("high", "low", "off")
JUDGE_MODES = ("online", "batch", "cascade")
DEFAULT_SURFACE = "default"


class ConfigError(ValueError):
    pass


class _Bad(Exception):
    """A problem found while parsing; parse_config prefixes the file name and raises ConfigError."""


# ---------------------------------------------------------------------------------------------------
# Checks: each takes (dotted key, value) and returns the value to keep, or raises _Bad naming the key.

Check = Callable[[str, object], object]


def _expects(expected: str):
    """Records on a check what it accepts, in words: docs/configuration-reference.md shows it as the key's type."""

    def mark(check: Check) -> Check:
        check.expected = expected  # type: ignore[attr-defined]
        return check

    return mark


def _bad(key: str, value: object, expected: str) -> _Bad:
    return _Bad(f"{key} = {value!r}: expected {expected}")


def _is_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _integer(minimum: int) -> Check:
    @_expects(f"an integer >= {minimum}")
    def check(key: str, value: object) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise _bad(key, value, f"an integer >= {minimum}")
        return value

    return check


def _number(low: float, high: float | None = None, *, low_open: bool = False, high_open: bool = False) -> Check:
    """A finite int or float in the range; kept as a float."""
    if high is None:
        expected = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        expected = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"

    def in_range(value: int | float) -> bool:
        above = value > low if low_open else value >= low
        below = high is None or (value < high if high_open else value <= high)
        return above and below

    @_expects(expected)
    def check(key: str, value: object) -> float:
        if not _is_number(value) or not in_range(value):
            raise _bad(key, value, expected)
        return float(value)

    return check


def _string(*, non_empty: bool = False) -> Check:
    @_expects("a non-empty string" if non_empty else "a string")
    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or (non_empty and not value.strip()):
            raise _bad(key, value, "a non-empty string" if non_empty else "a string")
        return value

    return check


def _choice(options: tuple[str, ...]) -> Check:
    @_expects(f"one of {', '.join(options)}")
    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or value not in options:
            raise _bad(key, value, f"one of {', '.join(options)}")
        return value

    return check


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@_expects("the name of an environment variable")
def _env_name(key: str, value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise _bad(key, value, "the name of an environment variable (letters, digits, _; not starting with a digit)")
    return value


@_expects('"" or a URL starting with http:// or https://')
def _base_url(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise _bad(key, value, 'a string: "" or a URL starting with http:// or https://')
    if value and not value.startswith(("http://", "https://")):
        # the value itself is not echoed: a URL may carry credentials
        raise _Bad(f'{key}: expected "" (the offline judge) or a URL starting with http:// or https://')
    return value


@_expects("a table per model: input, output (numbers >= 0)")
def _prices(key: str, value: object) -> dict:
    """model -> {input, output}: USD per million tokens, non-negative numbers."""
    table = _table(key, value)
    out = {}
    for model, price in table.items():
        at = f"{key}.{_key_part(model)}"
        price = _table(at, price)
        _reject_unknown(price, {"input", "output"}, at)
        for side in ("input", "output"):
            if side not in price:
                raise _Bad(f"[{at}] is missing required key '{side}' (USD per 1M tokens)")
        out[model] = {side: _number(0)(f"{at}.{side}", price[side]) for side in ("input", "output")}
    return out


@_expects("a table: reason = owner (non-empty strings)")
def _owners(key: str, value: object) -> dict:
    """reason -> owner, for the reasons in QUEUE_REASONS."""
    table = _table(key, value)
    for reason, owner in table.items():
        if reason not in QUEUE_REASONS:
            raise _Bad(f"{key}.{_key_part(reason)}: unknown reason (expected one of {', '.join(QUEUE_REASONS)})")
        _string(non_empty=True)(f"{key}.{reason}", owner)
    return dict(table)


@_expects('"" or a regular expression with a named group ref')
def _marker_pattern(key: str, value: object) -> str:
    """A regex that compiles, has a named group `ref`, and matches no empty text (it would cite everywhere)."""
    if not isinstance(value, str):
        raise _bad(key, value, "a string: a regular expression with a named group 'ref'")
    if value == "":
        return value
    try:
        pattern = re.compile(value)
    except re.error as exc:
        raise _Bad(f"{key} = {value!r}: not a regular expression: {exc}") from None
    if "ref" not in pattern.groupindex:
        raise _Bad(f"{key} = {value!r}: the pattern has no named group 'ref' (write (?P<ref>...) around the id)")
    if pattern.fullmatch(""):
        raise _Bad(f"{key} = {value!r}: the pattern matches empty text")
    return value


def _opt(default, check: Check, doc: str, **kwargs):
    """A config field: its default, the check its value from the file must pass, and what it means in one line
    (docs/configuration-reference.md is generated from these: scripts/config_reference.py)."""
    return field(default=default, metadata={"check": check, "doc": doc}, **kwargs)


@_expects('the name of an environment variable, or ""')
def _env_name_or_empty(key: str, value: object) -> str:
    return _env_name(key, value) if value != "" else ""


# ---------------------------------------------------------------------------------------------------
# Sections


@dataclass(frozen=True)
class SurfacePolicy:
    """[surfaces.NAME]: the policy of one product surface; [surfaces.default] applies to every surface not listed."""

    name: str
    stakes: str = _opt(
        "low",
        _choice(STAKES),
        "the support gate's policy: high judges every citation, low a deterministic sample, off none",
    )
    sample_rate: float = _opt(0.1, _number(0, 1), "the share of provenance-passing citations judged when stakes = low")
    template: str = _opt(
        "auto",
        _string(),
        "the template profile that rendered the prompts: auto, a built-in or a [templates.NAME] profile",
    )
    owner: str = _opt("unassigned", _string(non_empty=True), "who owns the surface's queue entries")
    citation_marker: str = _opt(
        "",
        _marker_pattern,
        'the surface\'s own inline citation marker, replacing the built-in styles ([1], 【1】, (Source 2), ...); "" = '
        "the built-in styles (docs/log-format.md)",
    )


@dataclass(frozen=True)
class SecondaryJudgeConfig:
    """[judge.secondary]: a candidate judge run on a sample of the primary's judged pairs, for agreement only
    (defs/support.py judge_agreement); it never changes a verdict, the queue or a metric. Timeouts, retries and
    concurrency are the primary's."""

    base_url: str = _opt("", _base_url, "the candidate's endpoint; \"\" = the primary's endpoint")
    model: str = _opt(
        "",
        _string(),
        "the candidate's model; required with base_url. Neither base_url nor model: the offline judge `offline` names",
    )
    api_key_env: str = _opt("", _env_name_or_empty, 'the variable holding its key; "" = the primary\'s api_key_env')
    sample_rate: float = _opt(
        0.1, _number(0, 1), "the share of the primary's judged pairs also sent to the candidate (a stable hash sample)"
    )
    offline: str = _opt(
        "lexical", _choice(("lexical", "heuristic")), "the candidate when neither base_url nor model is set"
    )


@_expects("a table (the keys of [judge.secondary])")
def _secondary(key: str, value: object) -> SecondaryJudgeConfig:
    secondary = _build(SecondaryJudgeConfig, _table(key, value), key)
    if secondary.base_url and not secondary.model.strip():
        raise _Bad(f"[{key}] sets base_url: it also needs model (the candidate judge's model name)")
    return secondary


@dataclass(frozen=True)
class JudgeConfig:
    """[judge]: the support judge. An empty base_url means the offline judge (`offline`); the environment overrides
    base_url, model and the key (CITEGATE_JUDGE_BASE_URL, CITEGATE_JUDGE_MODEL, CITEGATE_JUDGE_API_KEY)."""

    base_url: str = _opt(
        "", _base_url, 'the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1; "" = the offline judge'
    )
    model: str = _opt("gpt-4.1-mini", _string(non_empty=True), "the judge model")
    api_key_env: str = _opt(
        "CITEGATE_JUDGE_API_KEY",
        _env_name,
        "the name of the variable that holds the key (the key itself never goes in a file, log, table or metadata)",
    )
    concurrency: int = _opt(8, _integer(1), "requests in flight at most")
    timeout_s: float = _opt(30.0, _number(0, low_open=True), "the deadline of one call, in seconds")
    max_tokens: int = _opt(5, _integer(1), "the completion's token limit (a reasoning model needs thousands)")
    max_retries: int = _opt(5, _integer(0), "retries after the first attempt")
    backoff_base_s: float = _opt(
        0.5, _number(0), "backoff = uniform(0, min(backoff_max_s, backoff_base_s x 2^attempt)), at least Retry-After"
    )
    backoff_max_s: float = _opt(30.0, _number(0, low_open=True), "the longest backoff, Retry-After capped to it")
    breaker_threshold: int = _opt(10, _integer(1), "consecutive failed pairs that open the circuit breaker")
    prices: dict = field(
        default_factory=dict,
        metadata={
            "check": _prices,
            "doc": "[judge.prices.MODEL]: input and output USD per million tokens, for cost_usd and citegate estimate",
        },
    )
    mode: str = _opt(
        "online",
        _choice(JUDGE_MODES),
        "online: one call per pair; batch: the uncached pairs through the OpenAI Batch API; cascade: the screen "
        "first, the LLM (online) only on what it leaves undecided. Without base_url the screen runs alone",
    )
    batch_wait_s: float = _opt(
        3600.0, _number(0), "batch: how long a run polls its batches, then leaves them open for the next run"
    )
    batch_poll_s: float = _opt(
        5.0, _number(0, low_open=True), "batch: the first poll interval, doubled after each poll up to batch_poll_max_s"
    )
    batch_poll_max_s: float = _opt(300.0, _number(0, low_open=True), "batch: the longest poll interval")
    batch_max_requests: int = _opt(50000, _integer(1), "batch: request lines per batch at most (OpenAI's limit)")
    batch_discount: float = _opt(
        0.5, _number(0, 1), "batch: the share of the online price a batch call costs (OpenAI: half)"
    )
    batch_pending_days: int = _opt(
        7,
        _integer(0),
        'batch: how many days before yesterday the nightly schedule looks for "batch pending" verdicts to run again '
        "(0: yesterday only)",
    )
    offline: str = _opt(
        "screen",
        _choice(("screen", "lexical", "heuristic")),
        "the judge when no base_url is set: screen (citegate-screen-v1, fails closed), or the three-way lexical / "
        "heuristic (with a warning that they do not fail closed)",
    )
    workers: int = _opt(
        0,
        _integer(0),
        "processes for the offline judge and the numeric check: 0 = one per core (at most 4), 1 = in process",
    )
    secondary: SecondaryJudgeConfig | None = field(
        default=None,
        metadata={
            "check": _secondary,
            "doc": "[judge.secondary]: a candidate judge compared on a sample (absent: no second judge)",
        },
    )


@dataclass(frozen=True)
class CalibrationConfig:
    """[calibration]: where hand labels live, when a support gate counts as enforced, and when it is too strict."""

    labels: str = _opt(
        "labels",
        _string(non_empty=True),
        "folder (or file) of JSONL/CSV hand labels, relative to the config file (without the key: "
        "<warehouse stem>.labels/ beside the warehouse)",
    )
    false_pass_threshold: float = _opt(
        0.10,
        _number(0, 1, low_open=True, high_open=True),
        "enforced: on own labels, the false pass rate's 95% Wilson upper bound is under this",
    )
    min_negatives: int = _opt(
        30, _integer(0), "... on at least this many human no/partial own labels (the surface's, else pooled)"
    )
    false_fail_threshold: float = _opt(
        0.50,
        _number(0, 1, low_open=True),
        "too_strict: the false fail rate (human yes, judge not yes) is over this; 1 never flags",
    )
    min_positives: int = _opt(
        30, _integer(0), "... measured on at least this many human yes labels (fewer: too_strict is unknown)"
    )


@dataclass(frozen=True)
class QueueConfig:
    """[queue]: owners per reason, where reviewers' decisions are logged, best-evidence effort."""

    reviews: str = _opt(
        "data/reviews",
        _string(non_empty=True),
        "folder of the append-only reviews log, relative to the config file (without the key: "
        "<warehouse stem>.reviews/ beside the warehouse)",
    )
    best_evidence_k: int = _opt(2, _integer(0), "other passages of the prompt judged per support failure, at most")
    owners: dict = field(
        default_factory=dict,
        metadata={
            "check": _owners,
            "doc": "[queue.owners]: reason -> owner; a reason without one goes to its surface's owner",
        },
    )


@dataclass(frozen=True)
class StorageConfig:
    """[storage]: where the large tables' Delta tables go (lib/lake.py, docs/scaling.md)."""

    lake: str = _opt(
        "",
        _string(),
        "the lake: a folder relative to the config file, or s3://bucket/prefix (credentials from the AWS variables); "
        '"" = <warehouse stem>.lake/ beside the warehouse',
    )


@dataclass(frozen=True)
class RetentionConfig:
    """[retention]: how long prompt and chunk text is kept (lib/retention.py, docs/retention.md)."""

    text_days: int = _opt(
        0,
        _integer(0),
        "the nightly run drops the prompt, chunk, citation and answer text of days older than this (UTC), keeping "
        "hashes, offsets, verdicts and metrics; 0 = keep text forever",
    )


@dataclass(frozen=True)
class IngestConfig:
    """[ingest]: how landing files are read."""

    settle_seconds: float = _opt(
        300.0,
        _number(0),
        "an unterminated last line, or a file still changing, waits until the file has been quiet this long "
        "(or citegate run --final)",
    )
    max_line_bytes: int = _opt(
        33554432,
        _integer(1024),
        "the longest line read (32 MiB); a longer one is a line_too_long reject, its first 64 KiB kept",
    )
    max_decompressed_bytes: int = _opt(
        4294967296, _integer(1024), "a .gz inflating past this (4 GiB) is a decompressed_too_large reject"
    )
    workers: int = _opt(
        0,
        _integer(0),
        "processes that parse and normalize batches: 0 = one per core (at most 4), 1 = none; spawned only past "
        "32 MiB of new lines",
    )


@dataclass(frozen=True)
class AdaptersConfig:
    """[adapters]: how trace-format files (docs/adapters.md) become citegate-log/1 records."""

    surface_key: str = _opt(
        "surface", _string(non_empty=True), "the span attribute / metadata key naming the product surface"
    )
    chunk_id_key: str = _opt(
        "chunk_id",
        _string(non_empty=True),
        "the document metadata key holding the chunk id when the tracer logs no id",
    )
    citations_path: str = _opt(
        "citations",
        _string(non_empty=True),
        "dotted path to the list of {chunk_id, span, claim} in the answer's JSON",
    )
    default_surface: str = _opt(DEFAULT_SURFACE, _string(non_empty=True), "the surface of a call that names none")
    max_file_bytes: int = _opt(
        67108864,
        _integer(1024),
        "a trace file is converted whole (about 15x its size in memory); a larger one (64 MiB) is a "
        "trace_file_too_large reject",
    )

    def settings(self) -> AdapterSettings:
        """What the adapters are given (lib/adapters/base.py)."""
        return AdapterSettings(
            surface_key=self.surface_key,
            chunk_id_key=self.chunk_id_key,
            citations_path=self.citations_path,
            default_surface=self.default_surface,
        )


@dataclass(frozen=True)
class ReviewPageConfig:
    """[review_page]: `citegate serve`'s sessions and connection limits (docs/review-web.md)."""

    session_idle_minutes: float = _opt(
        120.0, _number(0, low_open=True), "a signed-in session unused this long ends (minutes)"
    )
    session_max_hours: float = _opt(
        12.0, _number(0, low_open=True), "a session ends this long after sign-in, used or not (hours)"
    )
    max_connections: int = _opt(
        256,
        _integer(1),
        "open connections at most (never more than the open-file limit leaves); past it a new connection closes "
        "the one that has waited longest for a request",
    )
    head_timeout_s: float = _opt(10.0, _number(0, low_open=True), "a request's head must arrive within this (s)")
    keep_alive_s: int = _opt(5, _integer(1), "an idle kept-alive connection is closed after this (s)")
    body_timeout_s: float = _opt(
        30.0, _number(0, low_open=True), "a request's body must arrive within this (s); bodies over 64 KB are refused"
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
    except _Bad as exc:
        raise ConfigError(f"{path or 'citegate.toml'}: {exc}") from None


def _parse(raw: dict, path: str | None) -> Config:
    _reject_unknown(raw, _TOP_KEYS, "")
    templates = dict(BUILTIN_PROFILES)
    for name, table in _tables(raw.get("templates", {}), "templates"):
        templates[name] = _profile(name, table)
    surfaces: dict[str, SurfacePolicy] = {}
    for name, table in _tables(raw.get("surfaces", {}), "surfaces"):
        key = f"surfaces.{_key_part(name)}"
        policy = _build(SurfacePolicy, table, key, name=name)
        if policy.template not in templates:
            raise _Bad(
                f"{key}.template = {policy.template!r}: no such template "
                f"(built-in: {', '.join(BUILTIN_PROFILES)}; or define [templates.{policy.template}])"
            )
        surfaces[name] = policy
    surfaces.setdefault(DEFAULT_SURFACE, SurfacePolicy(name=DEFAULT_SURFACE))
    sections = {key: _build(cls, _table(key, raw.get(key, {})), key) for key, cls in _SECTIONS.items()}
    return Config(path=path, surfaces=surfaces, templates=templates, **sections)


def _build(cls, table: dict, key: str, **fixed):
    """An instance of the config dataclass cls from its table, each value passed through its field's check."""
    checks = {f.name: f.metadata["check"] for f in fields(cls) if "check" in f.metadata}
    _reject_unknown(table, set(checks), key)
    values = {name: checks[name](f"{key}.{name}", value) for name, value in table.items()}
    return cls(**fixed, **values)


def _profile(name: str, table: dict) -> Profile:
    key = f"templates.{_key_part(name)}"
    _reject_unknown(table, _PROFILE_KEYS, key)
    for required in _PROFILE_REQUIRED:
        if required not in table:
            raise _Bad(f"[{key}] is missing required key '{required}'")
    for field_name, value in table.items():
        _string()(f"{key}.{field_name}", value)  # every profile field is a string (a regex, a choice or text)
    profile = Profile(name=name, **table)
    try:
        validate_profile(profile, key)
    except ProfileError as exc:
        raise _Bad(str(exc)) from None
    return profile


def _table(key: str, value: object) -> dict:
    if not isinstance(value, dict):
        raise _Bad(f"[{key}] must be a table, got {value!r}")
    return value


def _tables(section: object, key: str):
    for name, table in _table(key, section).items():
        yield name, _table(f"{key}.{_key_part(name)}", table)


def _key_part(name: str) -> str:
    """One part of a dotted key as TOML spells it: bare when it can be, quoted otherwise."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _reject_unknown(table: dict, allowed: set[str], key: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        prefix = f"{key}." if key else ""
        raise _Bad(
            f"unknown key '{prefix}{_key_part(unknown[0])}' "
            f"(allowed in [{key or 'top level'}]: {', '.join(sorted(allowed))})"
        )
