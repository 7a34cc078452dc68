"""Where the warehouse, the landing folder and citegate.toml live; connections open only inside assets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path

import dagster as dg
import duckdb

from citegate_assets.lib.config import Config, load_config, parse_config
from citegate_assets.lib.judge.base import Judge
from citegate_assets.lib.judge.factory import ENV_BASE_URL, ENV_MODEL, effective_judge_config, make_judge
from citegate_assets.lib.settings import Settings
from citegate_assets.lib.settings import resolve as resolve_settings
from citegate_assets.lib.warehouse import connect, ensure_schema

DUCKDB_POOL = "citegate_duckdb"


class WarehouseResource(dg.ConfigurableResource):
    """The DuckDB warehouse file, the landing folder of logged prompts, the citegate.toml in force, the
    published copy, the reviews log and the hand labels.

    Every path is resolved by citegate_assets.lib.settings, the one place that does it: a non-empty
    field here counts as the flag (the CLI fills every field with what it resolved and printed), then
    the environment (CITEGATE_WAREHOUSE, CITEGATE_LOGS, CITEGATE_CONFIG, CITEGATE_PUBLISHED,
    CITEGATE_REVIEWS, CITEGATE_LABELS), then the config file, then the defaults relative to the
    current directory (the nightly schedule under `dagster dev` resolves this way).
    """

    database: str = ""
    landing_folder: str = ""
    config_file: str = ""  # "<built-in>": the built-in defaults, no file
    published: str = ""
    labels_path: str = ""
    reviews_path: str = ""
    # `citegate run --final`: every landing file counts as finished, its unterminated last line included
    final_read: bool = False

    def settings(self) -> Settings:
        return resolve_settings(
            config=self.config_file or None,
            landing=self.landing_folder or None,
            warehouse=self.database or None,
            published=self.published or None,
            reviews=self.reviews_path or None,
            labels=self.labels_path or None,
            given_as="the resource config",
        )

    def reviews(self, config: Config | None = None) -> Path:
        """The reviews log folder (see lib/settings.py for the precedence)."""
        return self.settings().reviews

    def labels(self, config: Config | None = None) -> Path:
        """Hand labels, a file or a folder (see lib/settings.py for the precedence)."""
        return self.settings().labels

    def database_path(self) -> Path:
        return self.settings().warehouse

    def published_path(self) -> Path:
        """The data team's read-only copy."""
        return self.settings().published

    def landing_path(self) -> Path:
        return self.settings().landing

    def config(self) -> Config:
        path = self.settings().config
        return load_config(path) if path else parse_config({}, None)  # never load_config(None): it would look again

    def connect(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return _connect_with_schema(self.database_path())

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[WarehouseResource]:
        """Every run that uses the warehouse holds its run lock from start to end (lib/runlock.py): the
        runs the daemon launches as well as `citegate run` and `citegate calibrate` (re-entrant there).
        Resources are set up once per run by the in-process executor, before any step claims a pool slot.
        A run that finds the lock held waits CITEGATE_LOCK_WAIT_S seconds (default 0), then fails naming the holder."""
        from citegate_assets.lib.runlock import run_lock

        wait_s = float(os.environ.get("CITEGATE_LOCK_WAIT_S") or 0)
        on_wait = lambda holder: context.log.info(
            f"waiting up to {wait_s:.0f}s for the run that holds the warehouse ({holder})"
        )  # noqa: E731
        hint = "this run stops; run it again when that one ends (CITEGATE_LOCK_WAIT_S=SECONDS makes runs wait)"
        with run_lock(self.database_path(), wait_s=wait_s, on_wait=on_wait, hint=hint):
            yield self


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


@contextmanager
def _connect_with_schema(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with connect(path) as con:
        ensure_schema(con)
        yield con
