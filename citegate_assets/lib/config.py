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


def _bad(key: str, value: object, expected: str) -> _Bad:
    return _Bad(f"{key} = {value!r}: expected {expected}")


def _is_number(value: object) -> TypeGuard[int | float]:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _integer(minimum: int) -> Check:
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

    def check(key: str, value: object) -> float:
        if not _is_number(value) or not in_range(value):
            raise _bad(key, value, expected)
        return float(value)

    return check


def _string(*, non_empty: bool = False) -> Check:
    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or (non_empty and not value.strip()):
            raise _bad(key, value, "a non-empty string" if non_empty else "a string")
        return value

    return check


def _choice(options: tuple[str, ...]) -> Check:
    def check(key: str, value: object) -> str:
        if not isinstance(value, str) or value not in options:
            raise _bad(key, value, f"one of {', '.join(options)}")
        return value

    return check


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_name(key: str, value: object) -> str:
    if not isinstance(value, str) or not _ENV_NAME.fullmatch(value):
        raise _bad(key, value, "the name of an environment variable (letters, digits, _; not starting with a digit)")
    return value


def _base_url(key: str, value: object) -> str:
    if not isinstance(value, str):
        raise _bad(key, value, 'a string: "" or a URL starting with http:// or https://')
    if value and not value.startswith(("http://", "https://")):
        # the value itself is not echoed: a URL may carry credentials
        raise _Bad(f'{key}: expected "" (the offline judge) or a URL starting with http:// or https://')
    return value


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


def _owners(key: str, value: object) -> dict:
    """reason -> owner, for the reasons in QUEUE_REASONS."""
    table = _table(key, value)
    for reason, owner in table.items():
        if reason not in QUEUE_REASONS:
            raise _Bad(f"{key}.{_key_part(reason)}: unknown reason (expected one of {', '.join(QUEUE_REASONS)})")
        _string(non_empty=True)(f"{key}.{reason}", owner)
    return dict(table)


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


def _opt(default, check: Check, **kwargs):
    """A config field: its default and the check its value from the file must pass."""
    return field(default=default, metadata={"check": check}, **kwargs)


# ---------------------------------------------------------------------------------------------------
# Sections


@dataclass(frozen=True)
class SurfacePolicy:
    name: str
    stakes: str = _opt("low", _choice(STAKES))
    sample_rate: float = _opt(0.1, _number(0, 1))
    template: str = _opt("auto", _string())  # must also name a built-in or [templates.NAME] profile
    owner: str = _opt("unassigned", _string(non_empty=True))
    # the surface's own inline citation marker (README "Citations"): a regex with a named group `ref`; "" = the
    # built-in styles ([1], [1, 3], [1-3], 【1】, [^1], (Source 2), [chunk-id])
    citation_marker: str = _opt("", _marker_pattern)


@dataclass(frozen=True)
class SecondaryJudgeConfig:
    """[judge.secondary]: a candidate judge run on a sample of the primary's judged pairs, for agreement only
    (defs/support.py judge_agreement); it never changes a verdict, the queue or a metric. Timeouts, retries and
    concurrency are the primary's."""

    # "" = the primary's endpoint (another model on the same provider)
    base_url: str = _opt("", _base_url)
    # the candidate's model; required with base_url. Neither base_url nor model: the offline judge `offline` names
    model: str = _opt("", _string())
    # "" = the primary's api_key_env
    api_key_env: str = _opt("", lambda key, value: _env_name(key, value) if value != "" else "")
    # the share of the primary's judged pairs also sent to the secondary (a stable hash sample)
    sample_rate: float = _opt(0.1, _number(0, 1))
    # the secondary when neither base_url nor model is set: lexical | heuristic
    offline: str = _opt("lexical", _choice(("lexical", "heuristic")))


def _secondary(key: str, value: object) -> SecondaryJudgeConfig:
    secondary = _build(SecondaryJudgeConfig, _table(key, value), key)
    if secondary.base_url and not secondary.model.strip():
        raise _Bad(f"[{key}] sets base_url: it also needs model (the candidate judge's model name)")
    return secondary


@dataclass(frozen=True)
class JudgeConfig:
    """[judge]: the support judge. An empty base_url means the offline judge (`offline`)."""

    base_url: str = _opt("", _base_url)
    model: str = _opt("gpt-4.1-mini", _string(non_empty=True))
    # the name of the variable holding the key, never the key
    api_key_env: str = _opt("CITEGATE_JUDGE_API_KEY", _env_name)
    concurrency: int = _opt(8, _integer(1))
    timeout_s: float = _opt(30.0, _number(0, low_open=True))
    max_tokens: int = _opt(5, _integer(1))
    max_retries: int = _opt(5, _integer(0))
    backoff_base_s: float = _opt(0.5, _number(0))
    backoff_max_s: float = _opt(30.0, _number(0, low_open=True))
    breaker_threshold: int = _opt(10, _integer(1))
    # model -> {"input": USD per 1M tokens, "output": ...}
    prices: dict = field(default_factory=dict, metadata={"check": _prices})
    # online: one chat-completions call per pair; batch: the day's uncached pairs as one OpenAI Batch API job;
    # cascade: the screen first, the LLM (online) only on what it leaves undecided. Without base_url the screen alone
    mode: str = _opt("online", _choice(JUDGE_MODES))
    # batch: how long a run polls an open batch before leaving it open for the next run (its pairs: `error`)
    batch_wait_s: float = _opt(3600.0, _number(0))
    # batch: the first poll interval, doubled after each poll up to batch_poll_max_s
    batch_poll_s: float = _opt(5.0, _number(0, low_open=True))
    batch_poll_max_s: float = _opt(300.0, _number(0, low_open=True))
    # batch: at most this many requests per batch (OpenAI's limit is 50,000)
    batch_max_requests: int = _opt(50000, _integer(1))
    # batch: the share of the online price a batch call costs (OpenAI: half)
    batch_discount: float = _opt(0.5, _number(0, 1))
    # batch: the nightly schedule runs from the earliest day with "batch pending" verdicts, at most this many days
    # before yesterday, so a batch still open at a run's deadline is collected by the next nightly (0: yesterday only)
    batch_pending_days: int = _opt(7, _integer(0))
    # the judge when no base_url is set (lib/judge/factory.py): screen (citegate-screen-v1, fails closed) | lexical |
    # heuristic (three-way judges kept for comparison; a warning says they do not fail closed)
    offline: str = _opt("screen", _choice(("screen", "lexical", "heuristic")))
    # processes for the support gate's pure-Python work, the offline judge and the numeric check (lib/processes.py):
    # 0 = one per core, at most 4; 1 = in process
    workers: int = _opt(0, _integer(0))
    # [judge.secondary]: a candidate judge compared on a sample (None: no second judge, nothing changes)
    secondary: SecondaryJudgeConfig | None = field(default=None, metadata={"check": _secondary})


@dataclass(frozen=True)
class CalibrationConfig:
    """[calibration]: where hand labels live, when a support gate counts as enforced, and when it is too strict."""

    # folder (or file) of JSONL/CSV hand labels, relative to the config file
    labels: str = _opt("labels", _string(non_empty=True))
    # the 95% Wilson upper bound must be under this
    false_pass_threshold: float = _opt(0.10, _number(0, 1, low_open=True, high_open=True))
    # ... and rest on at least this many human no/partial labels
    min_negatives: int = _opt(30, _integer(0))
    # a judged surface is flagged too_strict when the false fail rate (human yes, judge not yes) is over this:
    # the gate then rejects more true citations than it passes, and floods the queue; 1 never flags
    false_fail_threshold: float = _opt(0.50, _number(0, 1, low_open=True))
    # ... measured on at least this many human yes labels (fewer: too_strict is unknown, null)
    min_positives: int = _opt(30, _integer(0))


@dataclass(frozen=True)
class QueueConfig:
    """[queue]: owners per reason, where reviewers' decisions are logged, best-evidence effort."""

    # folder of the append-only reviews log, relative to the config file
    reviews: str = _opt("data/reviews", _string(non_empty=True))
    # at most this many other passages judged per support failure
    best_evidence_k: int = _opt(2, _integer(0))
    # reason -> owner; a reason without one goes to the surface's owner
    owners: dict = field(default_factory=dict, metadata={"check": _owners})


@dataclass(frozen=True)
class StorageConfig:
    """[storage]: where the large tables' Delta tables go (lib/lake.py, docs/scaling.md)."""

    # the lake: a folder, relative to the config file (lib/settings.py resolves it; default <warehouse stem>.lake/),
    # or s3://bucket/prefix with the endpoint and credentials from the AWS variables (docs/object-storage.md)
    lake: str = _opt("", _string())


@dataclass(frozen=True)
class RetentionConfig:
    """[retention]: how long prompt and chunk text is kept (lib/retention.py, docs/retention.md).

    text_days (default 0 = keep text forever): the nightly run drops the raw prompt, chunk, citation and answer
        text of every day partition older than this many days before today (UTC), keeping hashes, offsets,
        verdicts and metrics; an integer >= 0.
    """

    text_days: int = _opt(0, _integer(0))


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

    settle_seconds: float = _opt(300.0, _number(0))
    max_line_bytes: int = _opt(33554432, _integer(1024))
    max_decompressed_bytes: int = _opt(4294967296, _integer(1024))
    workers: int = _opt(0, _integer(0))


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

    surface_key: str = _opt("surface", _string(non_empty=True))
    chunk_id_key: str = _opt("chunk_id", _string(non_empty=True))
    citations_path: str = _opt("citations", _string(non_empty=True))
    default_surface: str = _opt(DEFAULT_SURFACE, _string(non_empty=True))
    max_file_bytes: int = _opt(67108864, _integer(1024))

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
    """[review_page]: `citegate serve`'s sessions and connection limits (docs/review-web.md).

    session_idle_minutes (default 120): a signed-in session unused this long ends; a number > 0.
    session_max_hours (default 12): a session ends this long after sign-in, used or not; a number > 0.
    max_connections (default 256): open connections at most (never more than the open-file limit leaves); past
        it a new connection closes the one that has waited longest for a request; an integer >= 1.
    head_timeout_s (default 10): a request's head must arrive within this many seconds; a number > 0.
    keep_alive_s (default 5): an idle kept-alive connection is closed after this many seconds; an integer >= 1.
    body_timeout_s (default 30): a request's body must arrive within this many seconds; a number > 0.
    """

    session_idle_minutes: float = _opt(120.0, _number(0, low_open=True))
    session_max_hours: float = _opt(12.0, _number(0, low_open=True))
    max_connections: int = _opt(256, _integer(1))
    head_timeout_s: float = _opt(10.0, _number(0, low_open=True))
    keep_alive_s: int = _opt(5, _integer(1))
    body_timeout_s: float = _opt(30.0, _number(0, low_open=True))


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
