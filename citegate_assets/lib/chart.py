"""The weekly rates chart: one small panel per surface, the four pass/repair rates over the weeks."""

from __future__ import annotations

import base64
import math
from pathlib import Path

import polars as pl

RATES = ("provenance_pass_rate", "support_pass_rate", "end_to_end_pass_rate", "queue_repair_rate")
TITLE = "citegate weekly rates per surface"
# 12 x 8 inches at 100 dpi: a 1200 x 800 PNG.
FIGSIZE = (12, 8)
DPI = 100
MAX_XTICK_LABELS = 8
# No "Software" (matplotlib version) chunk, so the bytes depend on the data only.
PNG_METADATA = {"Software": None}


def rates_chart_png(metrics: pl.DataFrame, path: Path) -> Path:
    """Draw `metrics` (long format: week_start, surface, metric, value) into a PNG at `path`; return it.

    Metrics other than the four rates are ignored; null or missing values leave gaps in the lines.
    A frame without any of the four rates still gives a PNG, saying "no metrics yet".
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rates = _rates(metrics)
    fig = plt.figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    try:
        fig.suptitle(TITLE)
        if rates.is_empty():
            fig.text(0.5, 0.5, "no metrics yet", ha="center", va="center", fontsize=18, color="0.4")
        else:
            _draw(fig, rates)
        fig.savefig(path, format="png", dpi=DPI, metadata=PNG_METADATA)
    finally:
        plt.close(fig)
    return path


def png_data_uri(path: str | Path) -> str:
    """The PNG at `path` as a data URI, for embedding in markdown or HTML."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _rates(metrics: pl.DataFrame) -> pl.DataFrame:
    if metrics.is_empty():
        return metrics
    missing = {"week_start", "surface", "metric", "value"} - set(metrics.columns)
    if missing:
        raise ValueError(f"metrics frame lacks column(s): {', '.join(sorted(missing))}")
    return metrics.filter(pl.col("metric").is_in(RATES))


def _draw(fig, rates: pl.DataFrame) -> None:
    weeks = sorted(rates["week_start"].unique().to_list())
    surfaces = sorted(rates["surface"].unique().to_list())
    position = {week: i for i, week in enumerate(weeks)}
    values: dict[tuple[str, str], list[float]] = {}
    for week, surface, metric, value in rates.select("week_start", "surface", "metric", "value").iter_rows():
        series = values.setdefault((surface, metric), [math.nan] * len(weeks))
        series[position[week]] = math.nan if value is None else float(value)

    nrows, ncols = _grid(len(surfaces))
    axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False).ravel()
    step = max(1, math.ceil(len(weeks) / MAX_XTICK_LABELS))
    ticks = list(range(0, len(weeks), step))
    x = list(range(len(weeks)))
    for ax, surface in zip(axes, surfaces):
        for metric in RATES:
            series = values.get((surface, metric), [math.nan] * len(weeks))
            ax.plot(x, series, marker="o", markersize=4, linewidth=1.5, label=metric)
        ax.set_title(surface, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
        ax.set_xlim(-0.5, len(weeks) - 0.5)
        ax.set_xticks(ticks, [weeks[i].isoformat() for i in ticks], rotation=45, ha="right", fontsize=8)
        ax.tick_params(labelbottom=True)
        ax.grid(True, alpha=0.3)
    for ax in axes[len(surfaces) :]:
        ax.set_visible(False)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(RATES), frameon=False)


def _grid(n: int) -> tuple[int, int]:
    """Rows and columns for n panels: one row up to 3, then two rows up to 8, then 4 columns."""
    ncols = n if n <= 3 else min(4, math.ceil(n / 2))
    return math.ceil(n / ncols), ncols
