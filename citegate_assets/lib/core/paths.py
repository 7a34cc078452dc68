"""Where every file goes: one resolution of every path citegate reads or writes (no dagster import).

Precedence, the same for every setting:

    1. the command-line flag (or the resources' run config, which the CLI fills from what it resolved)
    2. the environment variable
    3. the config file's value (only [queue].reviews and [calibration].labels; a relative path is
       relative to the config file's folder)
    4. the default

| setting      | flag        | environment        | config file          | default                                   |
|--------------|-------------|--------------------|----------------------|-------------------------------------------|
| config       | --config    | CITEGATE_CONFIG    |                      | ./citegate.toml if present, else built-in |
| landing      | --logs      | CITEGATE_LOGS      |                      | ./data/landing                            |
| warehouse    | --warehouse | CITEGATE_WAREHOUSE |                      | ./data/warehouse.duckdb                   |
| published    | --published | CITEGATE_PUBLISHED |                      | <warehouse dir>/<stem>.published.duckdb   |
| reviews      | --reviews   | CITEGATE_REVIEWS   | [queue].reviews      | <warehouse dir>/<stem>.reviews/           |
| labels       | --labels    | CITEGATE_LABELS    | [calibration].labels | <warehouse dir>/<stem>.labels/            |
| dagster home |             | DAGSTER_HOME       |                      | <warehouse dir>/dagster_home/ (*)         |
| lake         | --lake      | CITEGATE_LAKE      | [storage].lake       | <warehouse dir>/<stem>.lake/              |

(*) From a project folder (workspace.yaml and dagster_home/dagster.yaml in the current directory) on the default
warehouse: the project's dagster_home/, the Dagster home `make ui` runs in, so `citegate run`'s runs show there.

Relative flags and environment values are relative to the current directory; so are the defaults
(never the installed package). The reviews log, the labels and the Dagster home belong to a
warehouse, so by default they sit beside it: two warehouses never share reviews or labels. The lake may also
be an object-store URI (s3://bucket/prefix, docs/object-storage.md), kept as it is: Settings.lake is then a
str, never resolved as a path.

Built-in data (SQL, the demo labels, the default dagster.yaml, the metrics lock) is read as package
resources, so a wheel install works anywhere; in a source checkout those resources are symlinks to the
project's top-level sql/, labels/ and dagster_home/dagster.yaml.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path
from typing import Literal, overload

from citegate_assets.lib.core.folders import read_named_file

BUILTIN_CONFIG = "<built-in>"  # as a --config / config_file value: use the built-in defaults, no file

NAMES = ("config", "landing", "warehouse", "published", "reviews", "labels", "dagster_home", "lake")
FLAGS = {
    "config": "--config",
    "landing": "--logs",
    "warehouse": "--warehouse",
    "published": "--published",
    "reviews": "--reviews",
    "labels": "--labels",
    "dagster_home": "--dagster-home",
    "lake": "--lake",
}
ENV = {
    "config": "CITEGATE_CONFIG",
    "landing": "CITEGATE_LOGS",
    "warehouse": "CITEGATE_WAREHOUSE",
    "published": "CITEGATE_PUBLISHED",
    "reviews": "CITEGATE_REVIEWS",
    "labels": "CITEGATE_LABELS",
    "dagster_home": "DAGSTER_HOME",
    "lake": "CITEGATE_LAKE",
}
CONFIG_KEYS = {"reviews": ("queue", "reviews"), "labels": ("calibration", "labels"), "lake": ("storage", "lake")}
DEFAULTS = {
    "config": "./citegate.toml",
    "landing": "./data/landing",
    "warehouse": "./data/warehouse.duckdb",
    "published": "<warehouse stem>.published.duckdb beside the warehouse",
    "reviews": "<warehouse stem>.reviews/ beside the warehouse",
    "labels": "<warehouse stem>.labels/ beside the warehouse",
    "dagster_home": "dagster_home/ beside the warehouse",
    "lake": "<warehouse stem>.lake/ beside the warehouse",
}


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Settings:
    """Every resolved path (absolute), and where each one came from."""

    config: Path | None  # None: the built-in defaults
    landing: Path
    warehouse: Path
    published: Path
    reviews: Path
    labels: Path
    dagster_home: Path
    lake: Path | str  # the Delta tables the published copy's views read (lib/storage/lake.py); str: an s3:// URI
    # name -> (kind, text): kind is flag | env | config | default | demo; text says it for a person
    sources: Mapping[str, tuple[str, str]] = field(default_factory=dict, hash=False)

    def kind(self, name: str) -> str:
        return self.sources[name][0]

    def describe(self) -> list[str]:
        """One line per setting, as the CLI prints them: `warehouse: /x/w.duckdb  (from --warehouse)`."""
        width = max(len(n) for n in NAMES) + 1
        lines = []
        for name in NAMES:
            value = getattr(self, name)
            shown = "built-in defaults (no config file)" if value is None else str(value)
            lines.append(f"{(name.replace('_', ' ') + ':'):<{width}} {shown}  ({self.sources[name][1]})")
        return lines

    def with_value(self, name: str, value: Path, kind: str, text: str) -> Settings:
        """A copy with one setting replaced (e.g. the demo's built-in labels)."""
        return replace(self, **{name: value}, sources={**self.sources, name: (kind, text)})


def resolve(
    *,
    config: str | os.PathLike | None = None,
    landing: str | os.PathLike | None = None,
    warehouse: str | os.PathLike | None = None,
    published: str | os.PathLike | None = None,
    reviews: str | os.PathLike | None = None,
    labels: str | os.PathLike | None = None,
    dagster_home: str | os.PathLike | None = None,
    lake: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    given_as: str | None = None,
) -> Settings:
    """Resolve every setting: the arguments are the flags (None or "" = not given).

    given_as names where the arguments came from in describe() (default: the flag's name).
    Raises SettingsError for a config file that is missing or not TOML.
    """
    at = _Resolution(env, cwd, given_as)
    config_file = at.config(config)
    at.raw_config(config_file)  # a missing or broken config file is an error even when no path comes from it
    db = at.top("warehouse", warehouse)
    return Settings(
        config=config_file,
        landing=at.top("landing", landing),
        warehouse=db,
        published=at.beside("published", published, warehouse=db, config=config_file),
        reviews=at.beside("reviews", reviews, warehouse=db, config=config_file),
        labels=at.beside("labels", labels, warehouse=db, config=config_file),
        dagster_home=at.beside("dagster_home", dagster_home, warehouse=db, config=config_file),
        lake=at.beside_or_uri("lake", lake, warehouse=db, config=config_file),
        sources=at.sources,
    )


# One setting at a time, for the Dagster resources (each holds its own flags): the same rules as resolve()


Flag = str | os.PathLike | None
Env = Mapping[str, str] | None


def resolve_config(flag: Flag = None, *, env: Env = None, cwd: Flag = None) -> Path | None:
    """The config file in force, None for the built-in defaults (the file is not read here)."""
    return _Resolution(env, cwd).config(flag)


def resolve_top(name: str, flag: Flag = None, *, env: Env = None, cwd: Flag = None) -> Path:
    """landing or warehouse: the flag, the environment, the default (never the config file)."""
    return _Resolution(env, cwd).top(name, flag)


@overload
def resolve_beside(  # type: ignore[overload-overlap]
    name: Literal["lake"], flag: Flag = None, *, warehouse: Path, config: Path | None, env: Env = None, cwd: Flag = None
) -> Path | str: ...
@overload
def resolve_beside(
    name: str, flag: Flag = None, *, warehouse: Path, config: Path | None, env: Env = None, cwd: Flag = None
) -> Path: ...
def resolve_beside(
    name: str, flag: Flag = None, *, warehouse: Path, config: Path | None, env: Env = None, cwd: Flag = None
) -> Path | str:
    """published, reviews, labels, dagster_home or lake: the flag, the environment, the config file's value
    (reviews, labels, lake), then the default beside the warehouse. The lake may be an s3:// URI, returned
    as it is (a str), never resolved as a path."""
    if name == "lake":
        return _Resolution(env, cwd).beside_or_uri(name, flag, warehouse=warehouse, config=config)
    return _Resolution(env, cwd).beside(name, flag, warehouse=warehouse, config=config)


TOP_DEFAULTS = {"landing": "data/landing", "warehouse": "data/warehouse.duckdb"}


class _Resolution:
    """The precedence, implemented once: the flag, the environment variable, the config file, the default.
    Records where each value came from in sources."""

    def __init__(
        self,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike | None,
        given_as: str | None = None,
    ) -> None:
        self.env = os.environ if env is None else env
        self.base = Path(cwd) if cwd is not None else Path.cwd()
        self.given_as = given_as
        self.sources: dict[str, tuple[str, str]] = {}
        self._raw: dict[Path, dict] = {}

    def raw_config(self, path: Path | None) -> dict:
        if path is not None and path not in self._raw:
            self._raw[path] = _read_config(path)
        return self._raw.get(path, {}) if path is not None else {}

    def explicit(self, name: str, flag: str | os.PathLike | None) -> str | None:
        if flag is not None and str(flag) != "":
            self.sources[name] = ("flag", f"from {self.given_as or FLAGS[name]}")
            return str(flag)
        if self.env.get(ENV[name]):
            self.sources[name] = ("env", f"from ${ENV[name]}")
            return self.env[ENV[name]]
        return None

    def config(self, flag: str | os.PathLike | None) -> Path | None:
        chosen = self.explicit("config", flag)
        if chosen == BUILTIN_CONFIG:
            return None
        if chosen is not None:
            return _absolute(chosen, self.base)
        local = self.base / "citegate.toml"
        found = _absolute(local, self.base) if local.is_file() else None
        self.sources["config"] = (
            "default",
            "default: ./citegate.toml" if found else "default: no ./citegate.toml here",
        )
        return found

    def top(self, name: str, flag: str | os.PathLike | None) -> Path:
        chosen = self.explicit(name, flag)
        if chosen is None:
            self.sources[name] = ("default", f"default: {DEFAULTS[name]}")
        return _absolute(chosen if chosen is not None else TOP_DEFAULTS[name], self.base)

    def beside(self, name: str, flag: str | os.PathLike | None, *, warehouse: Path, config: Path | None) -> Path:
        found = self.beside_or_uri(name, flag, warehouse=warehouse, config=config)
        if isinstance(found, str):
            raise SettingsError(f"{name}: {found} is a URI; only the lake may be on object storage")
        return found

    def beside_or_uri(
        self, name: str, flag: str | os.PathLike | None, *, warehouse: Path, config: Path | None
    ) -> Path | str:
        chosen = self.explicit(name, flag)
        if chosen is not None:
            return chosen.rstrip("/") if _is_uri(chosen) else _absolute(chosen, self.base)
        if name in CONFIG_KEYS and config is not None:
            section, key = CONFIG_KEYS[name]
            raw = self.raw_config(config)
            value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
            if isinstance(value, str) and value.strip():
                self.sources[name] = ("config", f"from {config.name} [{section}].{key}")
                return value.strip().rstrip("/") if _is_uri(value.strip()) else _absolute(value, config.parent)
        if name == "dagster_home" and self.sources.get("warehouse", ("",))[0] == "default":
            project = project_dagster_home(self.base)
            if project is not None:  # `make ui` runs in this folder's Dagster home: the CLI's runs show there
                self.sources[name] = ("default", "default: the project's dagster_home/, the one `make ui` shows")
                return project
        self.sources[name] = ("default", f"default: {DEFAULTS[name]}")
        return {
            "published": warehouse.with_name(warehouse.stem + ".published.duckdb"),
            "reviews": warehouse.with_name(warehouse.stem + ".reviews"),
            "labels": warehouse.with_name(warehouse.stem + ".labels"),
            "dagster_home": warehouse.parent / "dagster_home",
            "lake": warehouse.with_name(warehouse.stem + ".lake"),
        }[name]


def project_dagster_home(folder: Path) -> Path | None:
    """folder/dagster_home when folder is a citegate project folder (it holds the workspace.yaml `make ui` loads and
    dagster_home/dagster.yaml), else None: from there, on its default warehouse, the CLI and the UI share one
    Dagster home."""
    home = folder / "dagster_home"
    if (folder / "workspace.yaml").is_file() and (home / "dagster.yaml").is_file():
        return home.resolve()
    return None


def _is_uri(value: str) -> bool:
    """An object-store URI (s3://bucket/prefix): kept as it is, never resolved as a path."""
    return "://" in value


def _absolute(value: str | os.PathLike, base: Path) -> Path:
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def _read_config(path: Path | None) -> dict:
    """The raw TOML, only to see which path keys the file sets (load_config checks everything else)."""
    if path is None:
        return {}
    try:
        return tomllib.loads(read_named_file(path).decode("utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"{path}: config file not found") from None
    except IsADirectoryError as exc:  # a folder, a FIFO (never opened to block), a socket...
        raise SettingsError(f"{exc}, not a config file") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: {exc}") from None


# --------------------------------------------------------------------------- built-in package data


def package_path(*parts: str) -> Path:
    """A file or folder shipped inside the citegate_assets package (importlib.resources)."""
    resource = files("citegate_assets").joinpath(*parts)
    if not isinstance(resource, Path):  # a zipped install: every resource would need extracting
        raise RuntimeError(f"citegate_assets is not installed as files ({resource}); install the wheel with pip")
    return resource


def sql_dir() -> Path:
    return package_path("sql")


def demo_labels() -> Path:
    """The 224 hand labels for the demo's domain."""
    return package_path("labels", "demo-labels.jsonl")


def default_dagster_yaml() -> Path:
    return package_path("dagster.yaml")


def source_checkout() -> Path | None:
    """The project folder when citegate runs from a source checkout (pip install -e .), else None.

    In a checkout the package's sql/ is a symlink to the project's top-level sql/; a wheel holds a copy,
    which must never be edited (e.g. by `citegate metrics --lock`)."""
    link = package_path("sql")
    if not link.is_symlink():
        return None
    root = link.resolve().parent
    return root if (root / "pyproject.toml").is_file() else None


def prepare_dagster_home(settings: Settings) -> Path:
    """The Dagster home to run in, created on first use with the package's dagster.yaml (one DuckDB
    writer at a time). An existing folder named by --dagster-home or $DAGSTER_HOME is used as it is."""
    home = settings.dagster_home
    created = not home.exists()
    home.mkdir(parents=True, exist_ok=True)
    if (created or settings.kind("dagster_home") == "default") and not (home / "dagster.yaml").exists():
        shutil.copyfile(default_dagster_yaml(), home / "dagster.yaml")
    return home
