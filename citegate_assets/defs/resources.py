"""The resources, one per external thing: the warehouse file, the landing folder, citegate.toml, the files
reviewers write, the judge endpoint. Connections open only inside assets.

Each resource holds only its own paths as strings; an empty one is resolved by lib/core/paths.py, the one
place that implements the precedence (the run config, which the CLI fills with what it resolved and printed,
then the environment, then citegate.toml, then the default beside the warehouse or in the current directory).
No field is a dg.EnvVar: see docs/decisions.md, "Resources"."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from citegate_assets.lib.config import Config, JudgeConfig, load_config, parse_config
from citegate_assets.lib.core.paths import BUILTIN_CONFIG, Settings, resolve_beside, resolve_config, resolve_top
from citegate_assets.lib.core.runlock import open_lock, run_lock
from citegate_assets.lib.storage.lake_store import LakeStore, open_store
from citegate_assets.lib.storage.warehouse import connect, ensure_schema
from citegate_assets.lib.support.judge.base import Judge
from citegate_assets.lib.support.judge.factory import (
    ENV_BASE_URL,
    ENV_MODEL,
    effective_judge_config,
    make_judge,
    make_tiers,
)
from citegate_assets.lib.support.judge.tiers import JudgeTiers

LOCK_WAIT_ENV = "CITEGATE_LOCK_WAIT_S"


class WarehouseResource(dg.ConfigurableResource):
    """The DuckDB warehouse file (CITEGATE_WAREHOUSE) and its published copy for the data team
    (CITEGATE_PUBLISHED, default beside it). Every run that uses it holds its run lock from start to end
    (shared by day runs), and a step holds the file only while a connection is open (lib/core/runlock.py)."""

    database: str = ""
    published: str = ""

    def database_path(self) -> Path:
        return resolve_top("warehouse", self.database)

    def published_path(self) -> Path:
        return resolve_beside("published", self.published, warehouse=self.database_path(), config=None)

    def connect(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        return _connect_with_schema(self.database_path())

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[WarehouseResource]:
        """Every run that uses the warehouse holds its run lock from start to end (lib/core/runlock.py): the
        runs the daemon launches as well as `citegate run` and `citegate calibrate` (re-entrant there).
        A day run (only daily assets) holds it shared, so day runs go side by side; any other exclusively, and
        waits for day runs to end.
        Resources are set up once per run by the in-process executor, before any step claims a pool slot.
        A run that finds the lock held waits CITEGATE_LOCK_WAIT_S seconds (default 0), then fails naming the holder."""
        global _report_wait
        wait_s = float(os.environ.get(LOCK_WAIT_ENV) or 0)
        log = context.log
        shared = is_day_run(context.run)

        def on_wait(holder: str) -> None:
            if log is not None:
                log.info(f"waiting up to {wait_s:.0f}s for the run that holds the warehouse ({holder})")

        def on_open_wait(holder: str) -> None:
            if log is not None:
                log.info(f"waiting for another day run to close the warehouse file ({holder})")

        hint = f"this run stops; run it again when that one ends ({LOCK_WAIT_ENV}=SECONDS makes runs wait)"
        with run_lock(self.database_path(), wait_s=wait_s, on_wait=on_wait, hint=hint, shared=shared):
            _report_wait = on_open_wait
            try:
                yield self
            finally:
                _report_wait = None


class LakeResource(dg.ConfigurableResource):
    """The lake: one Delta table per large table, partitioned by day (CITEGATE_LAKE, [storage].lake, else beside
    the warehouse; a folder or s3://bucket/prefix). A thin resource of our own around lib/storage/lake.py, not
    dagster-deltalake's IO manager, which filters a multi-day partition range on its first day only: the assets
    keep reading the warehouse, and the publish writes the days that changed (docs/scaling.md)."""

    location: str = ""

    def root(self, warehouse: WarehouseResource, config: CitegateConfigResource) -> Path | str:
        return resolve_beside("lake", self.location, warehouse=warehouse.database_path(), config=config.config_path())

    def store(self, warehouse: WarehouseResource, config: CitegateConfigResource) -> LakeStore:
        """The lake's store: what delta-rs writes to and the published file's views read (lib/storage/lake_store.py)."""
        return open_store(self.root(warehouse, config))


class LandingResource(dg.ConfigurableResource):
    """The landing folder the RAG product writes its prompt logs into (CITEGATE_LOGS)."""

    folder: str = ""
    # `citegate run --final`: every landing file counts as finished, its unterminated last line included
    final_read: bool = False

    def path(self) -> Path:
        return resolve_top("landing", self.folder)


class CitegateConfigResource(dg.ConfigurableResource):
    """citegate.toml (CITEGATE_CONFIG, else ./citegate.toml if present): surfaces, templates, judge,
    calibration and queue settings. "<built-in>" means the built-in defaults, no file."""

    config_file: str = ""
    # `citegate run --workers N`: overrides [ingest] workers and [judge] workers for the run (0: as configured)
    workers: int = 0
    # `citegate run --shards N`: overrides [ingest] shards for the run (0: as configured)
    shards: int = 0

    def config_path(self) -> Path | None:
        return resolve_config(self.config_file)

    def config(self) -> Config:
        path = self.config_path()
        cfg = load_config(path) if path else parse_config({}, None)  # never load_config(None): it would look again
        if self.workers > 0:
            cfg = replace(
                cfg,
                ingest=replace(cfg.ingest, workers=self.workers),
                judge=replace(cfg.judge, workers=self.workers),
            )
        if self.shards > 0:
            cfg = replace(cfg, ingest=replace(cfg.ingest, shards=self.shards))
        return cfg


class ReviewFilesResource(dg.ConfigurableResource):
    """What people write for a warehouse: the append-only reviews log folder (CITEGATE_REVIEWS) and the hand
    labels, a file or a folder (CITEGATE_LABELS). citegate.toml may name them ([queue].reviews,
    [calibration].labels); by default they sit beside the warehouse they belong to."""

    reviews: str = ""
    labels: str = ""

    def reviews_path(self, warehouse: WarehouseResource, config: CitegateConfigResource) -> Path:
        return resolve_beside("reviews", self.reviews, warehouse=warehouse.database_path(), config=config.config_path())

    def labels_path(self, warehouse: WarehouseResource, config: CitegateConfigResource) -> Path:
        return resolve_beside("labels", self.labels, warehouse=warehouse.database_path(), config=config.config_path())


class JudgeResource(dg.ConfigurableResource):
    """The support judge: [judge] of citegate.toml, then CITEGATE_JUDGE_BASE_URL / _MODEL, and the API key
    from the variable [judge].api_key_env names.
    No endpoint configured: the offline judge ([judge].offline: the screen citegate-screen-v1 by default)."""

    base_url: str = ""  # when set, overrides the file and the environment
    model: str = ""

    def build(self, config: Config, *, slots: int = 1) -> Judge:
        """The judge a single-tier reader calls: the LLM judge, else the offline judge. slots: the judge pool's
        limit; this step keeps its share of [judge] concurrency in flight."""
        return make_judge(self._config(config, slots), env=self._env())

    def tiers(self, config: Config, *, slots: int = 1) -> JudgeTiers:
        """The support gate's judges: the screen, the LLM judge, or both ([judge] mode = "cascade")."""
        return make_tiers(self._config(config, slots), env=self._env())

    def _config(self, config: Config, slots: int) -> JudgeConfig:
        cfg = effective_judge_config(config.judge)
        if self.base_url or self.model:
            cfg = replace(cfg, base_url=self.base_url or cfg.base_url, model=self.model or cfg.model)
        return judge_share(cfg, slots)

    @staticmethod
    def _env() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if k not in (ENV_BASE_URL, ENV_MODEL)}


def judge_share(cfg: JudgeConfig, slots: int) -> JudgeConfig:
    """[judge] with this step's share of the calls in flight, when `slots` judge steps may run at once."""
    return replace(cfg, concurrency=max(1, int(cfg.concurrency) // max(1, slots)))


def default_resources() -> dict[str, dg.ConfigurableResource]:
    """Every resource unconfigured: each resolves from the environment and the current directory (`dagster dev`,
    the daemon's runs); a run config fills them (`citegate run`, see run_config_for)."""
    return {
        "warehouse": WarehouseResource(),
        "lake": LakeResource(),
        "landing": LandingResource(),
        "citegate_config": CitegateConfigResource(),
        "review_files": ReviewFilesResource(),
        "judge": JudgeResource(),
    }


def run_config_for(
    settings: Settings, *, final_read: bool = False, workers: int | None = None, shards: int | None = None
) -> dict[str, Any]:
    """The resources' run config that makes a run use exactly these resolved paths (the CLI printed them)."""
    return {
        "warehouse": {
            "config": {
                "database": str(settings.warehouse),
                "published": str(settings.published),
            }
        },
        "lake": {"config": {"location": str(settings.lake)}},
        "landing": {"config": {"folder": str(settings.landing), "final_read": final_read}},
        "citegate_config": {
            "config": {
                "config_file": str(settings.config) if settings.config else BUILTIN_CONFIG,
                "workers": workers or 0,
                "shards": shards or 0,
            }
        },
        "review_files": {"config": {"reviews": str(settings.reviews), "labels": str(settings.labels)}},
    }


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=default_resources())


# the running run's logger for a wait on the warehouse file (set while a run holds the warehouse)
_report_wait: Callable[[str], None] | None = None


@contextmanager
def _connect_with_schema(path: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    with open_lock(path, on_wait=_report_wait), connect(path) as con:
        ensure_schema(con)
        yield con


def is_day_run(run: dg.DagsterRun | None) -> bool:
    """A run of daily assets only (a day run of `citegate run --workers N`, a run of a UI backfill). A run of the
    whole job has no selection (None, or empty when executed in process); a run of checks alone is not one."""
    if run is None or not run.asset_selection:
        return False
    return run.asset_selection <= day_assets()


@functools.cache
def day_assets() -> frozenset[dg.AssetKey]:
    from citegate_assets.definitions import loaded_defs

    graph = loaded_defs().resolve_asset_graph()
    return frozenset(k for k in graph.get_all_asset_keys() if graph.get(k).partitions_def is not None)
