"""Where every file goes: one resolution of every path citegate reads or writes (no dagster import).

Precedence, the same for every setting:

    1. the command-line flag (or the resource's run config, which the CLI fills from what it resolved)
    2. the environment variable
    3. the config file's value (only [queue].reviews and [calibration].labels; a relative path is
       relative to the config file's folder)
    4. the default

| setting      | flag        | environment        | config file           | default                                         |
|--------------|-------------|--------------------|-----------------------|-------------------------------------------------|
| config       | --config    | CITEGATE_CONFIG    |                       | ./citegate.toml if present, else built-in       |
| landing      | --logs      | CITEGATE_LOGS      |                       | ./data/landing                                  |
| warehouse    | --warehouse | CITEGATE_WAREHOUSE |                       | ./data/warehouse.duckdb                         |
| published    | --published | CITEGATE_PUBLISHED |                       | <warehouse dir>/<stem>.published.duckdb         |
| reviews      | --reviews   | CITEGATE_REVIEWS   | [queue].reviews       | <warehouse dir>/<stem>.reviews/                 |
| labels       | --labels    | CITEGATE_LABELS    | [calibration].labels  | <warehouse dir>/<stem>.labels/                  |
| dagster home |             | DAGSTER_HOME       |                       | <warehouse dir>/dagster_home/                   |

Relative flags and environment values are relative to the current directory; so are the defaults
(never the installed package). The reviews log, the labels and the Dagster home belong to a
warehouse, so by default they sit beside it: two warehouses never share reviews or labels.

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

BUILTIN_CONFIG = "<built-in>"  # as a --config / config_file value: use the built-in defaults, no file

NAMES = ("config", "landing", "warehouse", "published", "reviews", "labels", "dagster_home")
FLAGS = {
    "config": "--config",
    "landing": "--logs",
    "warehouse": "--warehouse",
    "published": "--published",
    "reviews": "--reviews",
    "labels": "--labels",
    "dagster_home": "--dagster-home",
}
ENV = {
    "config": "CITEGATE_CONFIG",
    "landing": "CITEGATE_LOGS",
    "warehouse": "CITEGATE_WAREHOUSE",
    "published": "CITEGATE_PUBLISHED",
    "reviews": "CITEGATE_REVIEWS",
    "labels": "CITEGATE_LABELS",
    "dagster_home": "DAGSTER_HOME",
}
CONFIG_KEYS = {"reviews": ("queue", "reviews"), "labels": ("calibration", "labels")}
DEFAULTS = {
    "config": "./citegate.toml",
    "landing": "./data/landing",
    "warehouse": "./data/warehouse.duckdb",
    "published": "<warehouse stem>.published.duckdb beside the warehouse",
    "reviews": "<warehouse stem>.reviews/ beside the warehouse",
    "labels": "<warehouse stem>.labels/ beside the warehouse",
    "dagster_home": "dagster_home/ beside the warehouse",
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

    def resource_config(self) -> dict[str, str]:
        """The run config of WarehouseResource that makes it use exactly these paths."""
        return {
            "database": str(self.warehouse),
            "landing_folder": str(self.landing),
            "config_file": str(self.config) if self.config else BUILTIN_CONFIG,
            "published": str(self.published),
            "reviews_path": str(self.reviews),
            "labels_path": str(self.labels),
        }


def resolve(
    *,
    config: str | os.PathLike | None = None,
    landing: str | os.PathLike | None = None,
    warehouse: str | os.PathLike | None = None,
    published: str | os.PathLike | None = None,
    reviews: str | os.PathLike | None = None,
    labels: str | os.PathLike | None = None,
    dagster_home: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike | None = None,
    given_as: str | None = None,
) -> Settings:
    """Resolve every setting: the arguments are the flags (None or "" = not given).

    given_as names where the arguments came from in describe() (default: the flag's name).
    Raises SettingsError for a config file that is missing or not TOML.
    """
    env = os.environ if env is None else env
    base = Path(cwd) if cwd is not None else Path.cwd()
    flags = {
        "config": config,
        "landing": landing,
        "warehouse": warehouse,
        "published": published,
        "reviews": reviews,
        "labels": labels,
        "dagster_home": dagster_home,
    }
    sources: dict[str, tuple[str, str]] = {}
    values: dict[str, Path | None] = {}

    def explicit(name: str) -> str | None:
        flag = flags[name]
        if flag is not None and str(flag) != "":
            sources[name] = ("flag", f"from {given_as or FLAGS[name]}")
            return str(flag)
        if env.get(ENV[name]):
            sources[name] = ("env", f"from ${ENV[name]}")
            return env[ENV[name]]
        return None

    # the config file
    chosen = explicit("config")
    if chosen == BUILTIN_CONFIG:
        values["config"] = None
    elif chosen is not None:
        values["config"] = _absolute(chosen, base)
    else:
        local = base / "citegate.toml"
        values["config"] = _absolute(local, base) if local.is_file() else None
        sources["config"] = (
            "default",
            "default: ./citegate.toml" if values["config"] else "default: no ./citegate.toml here",
        )
    raw = _read_config(values["config"])

    for name, default in (("landing", "data/landing"), ("warehouse", "data/warehouse.duckdb")):
        chosen = explicit(name)
        values[name] = _absolute(chosen if chosen is not None else default, base)
        if chosen is None:
            sources[name] = ("default", f"default: {DEFAULTS[name]}")

    db: Path = values["warehouse"]  # type: ignore[assignment]
    beside = {
        "published": db.with_name(db.stem + ".published.duckdb"),
        "reviews": db.with_name(db.stem + ".reviews"),
        "labels": db.with_name(db.stem + ".labels"),
        "dagster_home": db.parent / "dagster_home",
    }
    for name, default_path in beside.items():
        chosen = explicit(name)
        if chosen is not None:
            values[name] = _absolute(chosen, base)
            continue
        if name in CONFIG_KEYS and values["config"] is not None:
            section, key = CONFIG_KEYS[name]
            value = raw.get(section, {}).get(key) if isinstance(raw.get(section), dict) else None
            if isinstance(value, str) and value.strip():
                values[name] = _absolute(value, values["config"].parent)
                sources[name] = ("config", f"from {values['config'].name} [{section}].{key}")
                continue
        values[name] = default_path
        sources[name] = ("default", f"default: {DEFAULTS[name]}")

    return Settings(**values, sources=sources)  # type: ignore[arg-type]


def _absolute(value: str | os.PathLike, base: Path) -> Path:
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


def _read_config(path: Path | None) -> dict:
    """The raw TOML, only to see which path keys the file sets (load_config checks everything else)."""
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise SettingsError(f"{path}: is a folder, not a config file") from None
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
