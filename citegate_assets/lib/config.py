"""citegate.toml: surfaces and their policy, template profiles. Unknown keys are errors that name the key."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from .profiles import BUILTIN_PROFILES, Profile, ProfileError, validate_profile

STAKES = ("high", "low", "off")
DEFAULT_SURFACE = "default"


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class SurfacePolicy:
    name: str
    stakes: str = "low"
    sample_rate: float = 0.1
    template: str = "plain-list"
    owner: str = "unassigned"


@dataclass(frozen=True)
class JudgeConfig:
    """[judge]: the support judge. An empty base_url means the offline heuristic judge."""

    base_url: str = ""
    model: str = "gpt-4.1-mini"
    api_key_env: str = "CITEGATE_JUDGE_API_KEY"  # the name of the variable holding the key, never the key
    concurrency: int = 8
    timeout_s: float = 30.0
    max_tokens: int = 5
    max_retries: int = 5
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    breaker_threshold: int = 10
    prices: dict = field(default_factory=dict)  # model -> {"input": USD per 1M tokens, "output": ...}


@dataclass(frozen=True)
class CalibrationConfig:
    """[calibration]: where hand labels live and when a support gate counts as enforced."""

    labels: str = "labels"  # folder (or file) of JSONL/CSV hand labels, relative to the config file
    false_pass_threshold: float = 0.10  # the 95% Wilson upper bound must be under this
    min_negatives: int = 30  # ... and rest on at least this many human no/partial labels


QUEUE_REASONS = (
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
    "context_not_found",
    "support_partial",
    "support_no",
    "judge_unparseable",
    "numeric_mismatch",
)


@dataclass(frozen=True)
class QueueConfig:
    """[queue]: owners per reason, where reviewers' decisions are logged, best-evidence effort."""

    reviews: str = "data/reviews"  # folder of the append-only reviews log, relative to the config file
    best_evidence_k: int = 2  # at most this many other passages judged per support failure
    owners: dict = field(default_factory=dict)  # reason -> owner; a reason without one goes to the surface's owner


@dataclass(frozen=True)
class Config:
    path: str | None
    surfaces: dict[str, SurfacePolicy]
    templates: dict[str, Profile] = field(default_factory=dict)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    queue: QueueConfig = field(default_factory=QueueConfig)

    def base_dir(self) -> Path:
        """Relative paths in the file are relative to the file."""
        return Path(self.path).resolve().parent if self.path else Path.cwd()

    def surface(self, name: str) -> SurfacePolicy:
        """The surface's policy; any surface not listed gets [surfaces.default]."""
        return self.surfaces.get(name) or self.surfaces[DEFAULT_SURFACE]

    def profile(self, name: str) -> Profile | None:
        return self.templates.get(name)


_TOP_KEYS = {"surfaces", "templates", "judge", "calibration", "queue"}
_QUEUE_KEYS = {f.name for f in fields(QueueConfig)}
_JUDGE_KEYS = {f.name for f in fields(JudgeConfig)}
_CALIBRATION_KEYS = {f.name for f in fields(CalibrationConfig)}
_NUMBER_KEYS = {"concurrency", "timeout_s", "max_tokens", "max_retries", "backoff_base_s", "backoff_max_s",
                "breaker_threshold", "false_pass_threshold", "min_negatives", "best_evidence_k"}
_SURFACE_KEYS = {f.name for f in fields(SurfacePolicy)} - {"name"}
_PROFILE_KEYS = {f.name for f in fields(Profile)} - {"name", "_compiled"}


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
        raw = tomllib.loads(Path(resolved).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{resolved}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{resolved}: {exc}") from None
    return parse_config(raw, str(resolved))


def parse_config(raw: dict, path: str | None) -> Config:
    where = path or "citegate.toml"
    _reject_unknown(raw, _TOP_KEYS, where, "")
    templates = dict(BUILTIN_PROFILES)
    for name, table in _tables(raw.get("templates", {}), where, "templates"):
        key = f"templates.{name}"
        _reject_unknown(table, _PROFILE_KEYS, where, key)
        for required in ("context_start", "chunk_header"):
            if required not in table:
                raise ConfigError(f"{where}: [{key}] is missing required key '{required}'")
        try:
            profile = Profile(name=name, **table)
            validate_profile(profile, f"{where}: {key}")
        except (TypeError, ProfileError) as exc:
            raise ConfigError(str(exc)) from None
        templates[name] = profile
    surfaces: dict[str, SurfacePolicy] = {}
    for name, table in _tables(raw.get("surfaces", {}), where, "surfaces"):
        key = f"surfaces.{name}"
        _reject_unknown(table, _SURFACE_KEYS, where, key)
        policy = SurfacePolicy(name=name, **table)
        if policy.stakes not in STAKES:
            raise ConfigError(f"{where}: {key}.stakes = {policy.stakes!r}: expected one of {', '.join(STAKES)}")
        if not isinstance(policy.sample_rate, (int, float)) or not 0 <= policy.sample_rate <= 1:
            raise ConfigError(f"{where}: {key}.sample_rate = {policy.sample_rate!r}: expected a number in [0, 1]")
        if policy.template not in templates:
            raise ConfigError(
                f"{where}: {key}.template = {policy.template!r}: no such template "
                f"(built-in: {', '.join(BUILTIN_PROFILES)}; or define [templates.{policy.template}])"
            )
        surfaces[name] = policy
    surfaces.setdefault(DEFAULT_SURFACE, SurfacePolicy(name=DEFAULT_SURFACE))
    judge = JudgeConfig(**_section(raw, "judge", _JUDGE_KEYS, where))
    for model, price in judge.prices.items():
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            raise ConfigError(f"{where}: judge.prices.{model} must be a table with 'input' and 'output' (USD per 1M tokens)")
    calibration = CalibrationConfig(**_section(raw, "calibration", _CALIBRATION_KEYS, where))
    if not 0 < calibration.false_pass_threshold < 1:
        raise ConfigError(f"{where}: calibration.false_pass_threshold must be in (0, 1)")
    queue = QueueConfig(**_section(raw, "queue", _QUEUE_KEYS, where))
    for reason, owner in queue.owners.items():
        if reason not in QUEUE_REASONS:
            raise ConfigError(f"{where}: queue.owners.{reason}: unknown reason (expected one of {', '.join(QUEUE_REASONS)})")
        if not isinstance(owner, str) or not owner.strip():
            raise ConfigError(f"{where}: queue.owners.{reason} must be a non-empty string")
    return Config(path=path, surfaces=surfaces, templates=templates, judge=judge, calibration=calibration, queue=queue)


def _section(raw: dict, key: str, allowed: set[str], where: str) -> dict:
    table = raw.get(key, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    _reject_unknown(table, allowed, where, key)
    for name, value in table.items():
        if name in _NUMBER_KEYS and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise ConfigError(f"{where}: {key}.{name} = {value!r}: expected a non-negative number")
    return table


def _tables(section: object, where: str, key: str):
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    for name, table in section.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: [{key}.{name}] must be a table")
        yield name, table


def _reject_unknown(table: dict, allowed: set[str], where: str, key: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        prefix = f"{key}." if key else ""
        raise ConfigError(
            f"{where}: unknown key '{prefix}{unknown[0]}' (allowed in [{key or 'top level'}]: {', '.join(sorted(allowed))})"
        )
