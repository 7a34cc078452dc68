"""Small renderers for summaries: markdown tables for Dagster metadata and plain tables for the CLI."""

from __future__ import annotations

import polars as pl

from citegate_assets.lib.core.terminal import safe


def _shown(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _escaped(df: pl.DataFrame, limit: int) -> pl.DataFrame:
    """Text cells (and lists of text, as one text) with control characters rendered visibly, cut to `limit`
    characters here: the values come from logs, and a cell polars had to cut itself could wrap onto a line of its
    own (it measures wide characters, which count twice, against its own cut)."""
    exprs = []
    for name, dtype in df.schema.items():
        if dtype == pl.String:
            exprs.append(
                pl.col(name).map_elements(lambda v: _shown(safe(v), limit), return_dtype=pl.String, skip_nulls=True)
            )
        elif dtype == pl.List(pl.String):
            listed = pl.col(name).map_elements(
                lambda v: _shown("[" + ", ".join("null" if x is None else f'"{safe(x)}"' for x in v) + "]", limit),
                return_dtype=pl.String,
                skip_nulls=True,
            )
            exprs.append(listed)
    out = df.with_columns(exprs) if exprs else df
    return out.rename({c: safe(c) for c in out.columns if safe(c) != c})


def _render(df: pl.DataFrame, max_rows: int, limit: int, formatting: str) -> str:
    # room for twice the characters kept, so polars neither cuts nor wraps a cell
    with pl.Config(
        tbl_formatting=formatting,  # type: ignore[arg-type]
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=max_rows,
        tbl_cols=-1,
        fmt_str_lengths=3 * limit,
        tbl_width_chars=65_535,
    ):
        return str(_escaped(df.head(max_rows), limit))


def markdown_table(df: pl.DataFrame, max_rows: int = 20) -> str:
    if df.is_empty():
        return "_no rows_"
    return _render(df, max_rows, 80, "MARKDOWN")


def text_table(df: pl.DataFrame, max_rows: int = 40) -> str:
    if df.is_empty():
        return "(no rows)"
    return _render(df, max_rows, 60, "ASCII_MARKDOWN")


def gate_summary(rows: list[dict]) -> str:
    """One line from the support_gate_status rows: which judge ran (with no endpoint, offline; for the screen, alone
    or first in a cascade, its held-out figures), on which labels each surface's support gate status rests, and the
    next step (with no endpoint, how to connect a judge). The run summary (and so `citegate demo`), `citegate
    calibrate`, `citegate metrics` and every page of the review page print this line: extend it here (a new judge
    tier, a cost), not at each of them. Surface names come from logs: escaped."""
    if not rows:
        return "Support gate: no status yet (run `citegate run` or `citegate calibrate`)."
    models = list(dict.fromkeys(row["judge_model"] for row in rows if row.get("judge_model")))
    notes = ["offline: no judge endpoint"] if any(row.get("judge_offline") for row in rows) else []
    notes += screen_held_out(models)
    judge = (", ".join(safe(m) for m in models) or "none") + (f" ({'; '.join(notes)})" if notes else "")
    groups: dict[str, list[str]] = {}
    for row in rows:
        status, labels = row["status"], row.get("labels")
        if labels == "own":
            key = f"{status} on own labels" + (" pooled over surfaces" if row.get("pooled") else "")
        elif labels == "none":
            key = f"{status} (no labels)"
        else:
            key = status
        groups.setdefault(key, []).append(safe(row["surface"]))
    rests = "; ".join(f"{key}: {', '.join(names)}" for key, names in groups.items())
    steps = list(dict.fromkeys(row["next_step"] for row in rows if row.get("next_step")))
    step = " / ".join(steps) if steps else "none (every judged surface enforced on own labels)"
    return f"Support gate: judge {judge}; {rests}; next: {step}."


def screen_held_out(models: list[str]) -> list[str]:
    """The screen's false pass and recall over every held-out test split (lib/support/judge/screen.py HELD_OUT), when it
    is
    one of the judges (alone, or the first tier of a cascade: "<screen> > <llm>")."""
    from citegate_assets.lib.calibration.rates import wilson_interval
    from citegate_assets.lib.support.judge.screen import HELD_OUT, SCREEN_MODEL

    if not any(SCREEN_MODEL in model.split(" > ") for model in models):
        return []
    passed, negatives = (sum(h.false_pass[i] for h in HELD_OUT) for i in (0, 1))
    found, positives = (sum(h.recall[i] for h in HELD_OUT) for i in (0, 1))
    _, high = wilson_interval(passed, negatives)
    return [
        f"held out, {sum(h.pairs for h in HELD_OUT):,} real labels: the screen's false pass {passed / negatives:.1%} "
        f"(95% upper bound {high or 0:.1%}), recall {found / positives:.1%}"
    ]
