"""The staging Delta tables of a sharded ingest (lib/ingest/shards.py): `<lake>/_staging/<table>`, appended to by the
shards,
each row tagged with its shard run's id, read by the collect step (lib/ingest/shard_collect.py) for marked shard runs
only,
and swept (every row deleted, the files vacuumed) before and after each sharded ingest. Appends never conflict in
delta-rs; an append that lost the race for a version is retried. No column statistics in the log (the rows hold
prompt text)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa  # type: ignore[import-untyped]

from citegate_assets.lib.storage.lake_store import LakeStore, LocalStore, open_store

STAGING = "_staging"
TEXT = "text"  # <staging>/text/<shard run>/day=…/<batch>.parquet: the prompt text files, as ingest writes them
SHARD_RUN = "shard_run"
# the ingest tables a shard stages, as insert_batch.sql names them
TABLES = (
    "batch_prompts",
    "batch_sections",
    "batch_retrievals",
    "batch_citations",
    "batch_answer_rejects",
    "batch_rejects",
    "batch_conflicts",
    "batch_source_lines",
)
LEDGER = "ledger"
CLAIMS = "claims"
MARKERS = "markers"
COMMIT_ATTEMPTS = 8

CLAIM_SCHEMA: dict[str, Any] = {
    "seq": pl.Int64,  # the shard's order of its claims (its files in landing order, each file's lines in order)
    "request_id": pl.String,
    "prompt_sha256": pl.String,
    "day": pl.Date,
    "source_file": pl.String,
    "line_no": pl.Int64,
    "kept": pl.Boolean,  # it claimed its request id in its shard (first there)
    "broken": pl.Boolean,  # ... but its frames failed to build: an unprocessable_record reject, no rows
    "raw_line": pl.String,  # a kept copy's line, for its reject row should a copy elsewhere come first
}
MARKER_SCHEMA: dict[str, Any] = {
    SHARD_RUN: pl.String,
    "shard": pl.Int64,
    "shards": pl.Int64,
    "files": pl.Int64,
    "lines_read": pl.Int64,
    "bytes_read": pl.Int64,
    "files_waiting": pl.Int64,
    "bytes_held": pl.Int64,
    "trace_files": pl.Int64,
    "calls_converted": pl.Int64,
    "parse_workers": pl.Int64,
}


class Staging:
    """The staging Delta tables: appends only (appends never conflict in delta-rs; a lost race is retried)."""

    def __init__(self, store: LakeStore):
        self.store = store

    def uri(self, table: str) -> str:
        return self.store.uri(table)

    def append(self, table: str, frame: pl.DataFrame, shard_run: str | None) -> None:
        from deltalake import WriterProperties, write_deltalake
        from deltalake.exceptions import CommitFailedError

        if shard_run is not None:
            frame = frame.with_columns(pl.lit(shard_run, pl.String).alias(SHARD_RUN))
        data = _delta_ready(frame.to_arrow())
        failure: Exception | None = None
        for _ in range(COMMIT_ATTEMPTS):
            try:
                with self.store.writing():
                    write_deltalake(
                        self.uri(table),
                        data,
                        mode="append",
                        schema_mode="merge",
                        configuration={"delta.dataSkippingNumIndexedCols": "0"},
                        storage_options=self.store.storage_options(),
                        writer_properties=WriterProperties(compression="ZSTD", compression_level=1),
                    )
                return
            except CommitFailedError as exc:
                failure = exc
                continue
        raise RuntimeError(f"{self.uri(table)}: {COMMIT_ATTEMPTS} appends lost to other writers ({failure})")

    def read(self, table: str, runs: list[str], columns: list[str] | None = None) -> pl.DataFrame | None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dt = DeltaTable(self.uri(table), storage_options=self.store.storage_options())
        except TableNotFoundError:
            return None
        if not runs:
            return None
        data = dt.to_pyarrow_table(columns=columns, filters=[(SHARD_RUN, "in", runs)])
        return pl.from_arrow(data)  # type: ignore[return-value]

    # -- the prompt text files: written by a shard's parse step as ingest writes them, moved, never re-encoded --
    def text_folder(self, shard_run: str) -> Path:
        """Where a shard's parse step writes its text files: in the staging folder, or (a bucket) a local folder
        published() uploads."""
        if isinstance(self.store, LocalStore):
            return Path(self.store.uri(f"{TEXT}/{shard_run}"))
        return Path(tempfile.mkdtemp(prefix="citegate-shard-text-"))

    def publish_text(self, shard_run: str, folder: Path) -> None:
        """A bucket: the shard's text files uploaded (before its marker), the local copies removed."""
        if isinstance(self.store, LocalStore):
            return
        fs = self.store._fs()  # type: ignore[attr-defined]
        for path in sorted(p for p in folder.rglob("*.parquet") if not p.name.startswith(".")):
            key = f"{TEXT}/{shard_run}/{path.relative_to(folder).as_posix()}"
            fs.put_file(str(path), self.store._path(key))  # type: ignore[attr-defined]
        shutil.rmtree(folder, ignore_errors=True)

    def text_file(self, shard_run: str, name: str, work: Path) -> Path:
        """A staged text file as a local path (a bucket's downloaded under work/)."""
        if isinstance(self.store, LocalStore):
            return Path(self.store.uri(f"{TEXT}/{shard_run}/{name}"))
        local = work / shard_run / name
        local.parent.mkdir(parents=True, exist_ok=True)
        self.store._fs().get_file(self.store._path(f"{TEXT}/{shard_run}/{name}"), str(local))  # type: ignore[attr-defined]
        return local

    def markers(self) -> pl.DataFrame:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dt = DeltaTable(self.uri(MARKERS), storage_options=self.store.storage_options())
        except TableNotFoundError:
            return pl.DataFrame(schema=MARKER_SCHEMA)
        return pl.from_arrow(dt.to_pyarrow_table())  # type: ignore[return-value]

    def tables(self) -> list[str]:
        return [*TABLES, LEDGER, CLAIMS, MARKERS]

    def sweep(self) -> None:
        """Every staging table and text file removed, the markers' table first (a sweep cut short leaves no marked
        run), each table's log before its files. Staging is transient: it is swept before and after each sharded
        ingest, which runs under the warehouse's run lock, so no shard writes meanwhile. Whole folders, not a Delta
        delete and vacuum: a vacuum in the same millisecond as the delete keeps the files it removed."""
        for prefix in [MARKERS, *(t for t in self.tables() if t != MARKERS), TEXT]:
            if isinstance(self.store, LocalStore):
                shutil.rmtree(self.store.uri(prefix), ignore_errors=True)
                continue
            for key in sorted(self.store.files(f"{prefix}/"), key=lambda k: "/_delta_log/" not in k):
                self.store.delete(key)


def _delta_ready(data: pa.Table) -> pa.Table:
    """Delta has no null type and no large/view strings' distinctions that matter here: cast them plainly."""
    fields = []
    for f in data.schema:
        t = f.type
        if pa.types.is_null(t):
            t = pa.string()
        fields.append(pa.field(f.name, t))
    return data.cast(pa.schema(fields)) if fields != list(data.schema) else data


def staging_root(lake: str | os.PathLike) -> str:
    """Where a lake's staging tables are: its `_staging` folder or prefix."""
    return open_store(lake).uri(STAGING)
