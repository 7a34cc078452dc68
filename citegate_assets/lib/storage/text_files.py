"""Writing a batch's prompt text files (schema 12; lib/storage/text_store.py reads, sweeps and rewrites them). No DuckDB
here: the parse processes write their batch's files themselves, so the text never travels back to the ingest
process."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

import polars as pl

from citegate_assets.lib.core.durable import private_dir, replace_durably

TEXT_SCHEMA = {"request_id": pl.String, "prompt_raw": pl.String, "prompt_normalized": pl.String}


def write_text_files(folder: Path, prompts: pl.DataFrame) -> pl.DataFrame:
    """Write a batch's prompt text as one Parquet file per day (fsynced, renamed into place); return the batch's
    rows for prompt_rows: text columns null, text_file naming the file (relative to the folder)."""
    if prompts.is_empty():
        return prompts.with_columns(text_file=pl.lit(None, pl.String))
    token = uuid.uuid4().hex
    names = []
    for (day,), part in prompts.group_by("day", maintain_order=True):
        name = f"day={day}/{token}.parquet"
        write_durably(part.select(*TEXT_SCHEMA), folder / name)
        names.append((day, name))
    files = pl.DataFrame(names, schema={"day": prompts["day"].dtype, "text_file": pl.String}, orient="row")
    return prompts.join(files, on="day", how="left").with_columns(
        prompt_raw=pl.lit(None, pl.String), prompt_normalized=pl.lit(None, pl.String)
    )


def write_durably(frame: pl.DataFrame, target: Path) -> None:
    """Written under a temporary name, fsynced, renamed into place, the rename fsynced: whole or absent."""
    private_dir(target.parent)
    tmp = target.with_name(f".{target.name}.tmp")
    frame.write_parquet(tmp, compression="lz4", statistics=False)
    replace_durably(tmp, target)


def remove_files(folder: Path | None, names: Iterable[str]) -> None:
    """Best effort: a file left behind is never read (no row names it) and the next sweep removes it."""
    if folder is None:
        return
    for name in names:
        try:
            (folder / name).unlink()
        except FileNotFoundError:
            pass


def keep_only(folder: Path, prompts: pl.DataFrame) -> pl.DataFrame:
    """prompts: the rows of a batch that ingest keeps (text_file set by write_text_files). Each file they name is
    rewritten with only their rows, and every other file of theirs removed: the text of a refused copy (a request id
    seen before) is then in no file, as `citegate forget` requires. Returns prompts pointing at the new files."""
    named = prompts["text_file"].drop_nulls().unique().to_list()
    renamed = []
    for name in named:
        kept = prompts.filter(pl.col("text_file") == name)["request_id"]
        rows = pl.read_parquet(folder / name).filter(pl.col("request_id").is_in(kept.implode()))
        new_name = name.replace(".parquet", f"-{uuid.uuid4().hex[:8]}.parquet")
        write_durably(rows.select(*TEXT_SCHEMA), folder / new_name)
        renamed.append((name, new_name))
    mapping = dict(renamed)
    return prompts.with_columns(text_file=pl.col("text_file").replace_strict(mapping, default=None))
