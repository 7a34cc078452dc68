"""Small renderers for summaries: markdown tables for Dagster metadata and plain tables for the CLI."""

from __future__ import annotations

import polars as pl

from citegate_assets.lib.terminal import safe


def _escaped(df: pl.DataFrame) -> pl.DataFrame:
    """Text cells (and lists of text) with control characters rendered visibly: the values come from logs."""
    exprs = []
    for name, dtype in df.schema.items():
        if dtype == pl.String:
            exprs.append(pl.col(name).map_elements(safe, return_dtype=pl.String, skip_nulls=True))
        elif dtype == pl.List(pl.String):
            exprs.append(
                pl.col(name).list.eval(pl.element().map_elements(safe, return_dtype=pl.String, skip_nulls=True))
            )
    out = df.with_columns(exprs) if exprs else df
    return out.rename({c: safe(c) for c in out.columns if safe(c) != c})


def markdown_table(df: pl.DataFrame, max_rows: int = 20) -> str:
    if df.is_empty():
        return "_no rows_"
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=max_rows,
        tbl_cols=-1,
        fmt_str_lengths=80,
        tbl_width_chars=400,
    ):
        return str(_escaped(df.head(max_rows)))


def text_table(df: pl.DataFrame, max_rows: int = 40) -> str:
    if df.is_empty():
        return "(no rows)"
    with pl.Config(
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=max_rows,
        tbl_cols=-1,
        fmt_str_lengths=60,
        tbl_width_chars=200,
        tbl_formatting="ASCII_MARKDOWN",
    ):
        return str(_escaped(df.head(max_rows)))
