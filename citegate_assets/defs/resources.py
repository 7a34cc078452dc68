"""Where the warehouse, the landing folder and citegate.toml live; connections open only inside assets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path

import dagster as dg
import duckdb

from citegate_assets.lib.config import Config, load_config
from citegate_assets.lib.judge.base import Judge
from citegate_assets.lib.judge.factory import ENV_BASE_URL, ENV_MODEL, effective_judge_config, make_judge
from citegate_assets.lib.warehouse import connect, ensure_schema

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DUCKDB_POOL = "citegate_duckdb"


class WarehouseResource(dg.ConfigurableResource):
    """The DuckDB warehouse file, the landing folder of logged prompts, and the citegate.toml in force.

    Empty fields fall back to CITEGATE_WAREHOUSE, CITEGATE_LOGS and CITEGATE_CONFIG, then to
    data/warehouse.duckdb, data/landing and ./citegate.toml under the project root.
    """

    database: str = ""
    landing_folder: str = ""
    config_file: str = ""
    labels_path: str = ""
    reviews_path: str = ""

    def reviews(self, config: Config) -> Path:
        """The reviews log folder: this field, else CITEGATE_REVIEWS, else [queue].reviews beside the config file."""
        chosen = self.reviews_path or os.environ.get("CITEGATE_REVIEWS")
        if chosen:
            return Path(chosen).resolve()
        base = Path(config.path).resolve().parent if config.path else PROJECT_ROOT
        return base / config.queue.reviews

    def labels(self, config: Config) -> Path:
        """Hand labels: this field, else CITEGATE_LABELS, else [calibration].labels beside the config file."""
        chosen = self.labels_path or os.environ.get("CITEGATE_LABELS")
        if chosen:
            return Path(chosen).resolve()
        base = Path(config.path).resolve().parent if config.path else PROJECT_ROOT
        return base / config.calibration.labels

    def database_path(self) -> Path:
        return _resolve(self.database, "CITEGATE_WAREHOUSE", "data/warehouse.duckdb")

    def published_path(self) -> Path:
        """The data team's read-only copy: CITEGATE_PUBLISHED, else <warehouse>.published.duckdb beside it."""
        if os.environ.get("CITEGATE_PUBLISHED"):
            return Path(os.environ["CITEGATE_PUBLISHED"]).resolve()
        db = self.database_path()
        return db.with_name(db.stem + ".published.duckdb")

    def landing_path(self) -> Path:
        return _resolve(self.landing_folder, "CITEGATE_LOGS", "data/landing")

    def config(self) -> Config:
        explicit = self.config_file or os.environ.get("CITEGATE_CONFIG")
        if explicit:
            return load_config(explicit)
        default = PROJECT_ROOT / "citegate.toml"
        return load_config(default if default.exists() else None)

    def connect(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return _connect_with_schema(self.database_path())


class JudgeResource(dg.ConfigurableResource):
    """The support judge: [judge] of citegate.toml, then CITEGATE_JUDGE_BASE_URL / _MODEL / _API_KEY.

    No endpoint configured: the offline deterministic judge citegate-heuristic-v1.
    """

    base_url: str = ""  # when set, overrides the file and the environment
    model: str = ""

    def build(self, config: Config) -> Judge:
        cfg = effective_judge_config(config.judge)
        if self.base_url or self.model:
            cfg = replace(cfg, base_url=self.base_url or cfg.base_url, model=self.model or cfg.model)
        return make_judge(cfg, env={k: v for k, v in os.environ.items() if k not in (ENV_BASE_URL, ENV_MODEL)})


def _resolve(value: str, env: str, default: str) -> Path:
    chosen = value or os.environ.get(env) or default
    path = Path(chosen)
    return path if path.is_absolute() else (PROJECT_ROOT / path if not value and not os.environ.get(env) else path.resolve())


@contextmanager
def _connect_with_schema(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with connect(path) as con:
        ensure_schema(con)
        yield con
