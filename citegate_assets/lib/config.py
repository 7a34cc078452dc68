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
class Config:
    path: str | None
    surfaces: dict[str, SurfacePolicy]
    templates: dict[str, Profile] = field(default_factory=dict)

    def surface(self, name: str) -> SurfacePolicy:
        """The surface's policy; any surface not listed gets [surfaces.default]."""
        return self.surfaces.get(name) or self.surfaces[DEFAULT_SURFACE]

    def profile(self, name: str) -> Profile | None:
        return self.templates.get(name)


_TOP_KEYS = {"surfaces", "templates"}
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
    return Config(path=path, surfaces=surfaces, templates=templates)


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
