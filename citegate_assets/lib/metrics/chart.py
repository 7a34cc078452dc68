"""The weekly rates chart: one panel per rate, one line per surface over the weeks.

Only the busiest surfaces get a line of their own (by citations checked, at most MAX_SURFACES); the rest are
pooled into one "other (N surfaces)" line, so the chart stays readable and quick to draw with hundreds of
surfaces (one panel per surface took minutes and could not be read)."""

from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from citegate_assets.lib.core.terminal import safe

if TYPE_CHECKING:  # matplotlib is imported when a chart is drawn, not with this module
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

RATES = ("provenance_pass_rate", "support_pass_rate", "end_to_end_pass_rate", "queue_repair_rate")
TITLE = "citegate weekly rates per surface"
# Surfaces drawn one by one (the busiest, by citations); the others are pooled into one "other" line.
MAX_SURFACES = 8
# The metric whose denominator counts a surface's citations (every citation checked by the provenance gate).
CITATIONS_METRIC = "provenance_pass_rate"
MAX_LABEL_CHARS = 40
# 12 x 8 inches at 100 dpi: a 1200 x 800 PNG.
FIGSIZE = (12, 8)
DPI = 100
MAX_XTICK_LABELS = 8
# No "Software" (matplotlib version) chunk, so the bytes depend on the data only.
PNG_METADATA = {"Software": None}


def rates_chart_png(metrics: pl.DataFrame, path: Path) -> Path:
    """Draw `metrics` (long format: week_start, surface, metric, value; with numerator and denominator, the
    busiest surfaces are chosen by citations and "other" is pooled) into a PNG at `path`; return it.

    Metrics other than the four rates are ignored; null or missing values leave gaps in the lines.
    A frame without any of the four rates still gives a PNG, saying "no metrics yet".
    """
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = rates_figure(metrics)
    try:
        fig.savefig(path, format="png", dpi=DPI, metadata=PNG_METADATA)
    finally:
        plt.close(fig)
    return path


def rates_figure(metrics: pl.DataFrame) -> Figure:
    """The chart as a matplotlib Figure (the caller closes it: plt.close(fig))."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = _rates(metrics)
    fig = plt.figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    try:
        fig.suptitle(TITLE)
        if rates.is_empty():
            fig.text(0.5, 0.5, "no metrics yet", ha="center", va="center", fontsize=18, color="0.4")
        else:
            _draw(fig, rates)
    except BaseException:
        plt.close(fig)
        raise
    return fig


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


def busiest_surfaces(rates: pl.DataFrame) -> tuple[list[str], list[str]]:
    """(drawn, pooled): the MAX_SURFACES surfaces with the most citations (ties by name), and the rest.

    Citations are the CITATIONS_METRIC denominators summed over the weeks; a frame without denominators
    weighs every surface the same (so the first by name are drawn)."""
    surfaces = rates["surface"].unique().to_list()
    weight = dict.fromkeys(surfaces, 0.0)
    if "denominator" in rates.columns:
        cited = rates.filter(pl.col("metric") == CITATIONS_METRIC).group_by("surface").agg(pl.col("denominator").sum())
        weight.update({s: float(n or 0) for s, n in cited.iter_rows()})
    ranked = sorted(surfaces, key=lambda s: (-weight[s], s))
    return ranked[:MAX_SURFACES], ranked[MAX_SURFACES:]


def legend_label(surface: str) -> str:
    """A surface name as a legend label: logged text, so control characters are shown escaped (never obeyed
    by a viewer or breaking the layout), "$" cannot start matplotlib mathtext, and long names are cut."""
    text = safe(surface).replace("$", r"\$") or "(empty)"
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def _pooled(rates: pl.DataFrame, surfaces: list[str]) -> pl.DataFrame:
    """One (week_start, metric, value) series for the pooled surfaces: sum of numerators over sum of
    denominators (the rate of all their citations together); the mean of their rates without those columns."""
    rest = rates.filter(pl.col("surface").is_in(surfaces))
    if {"numerator", "denominator"} <= set(rest.columns):
        value = pl.when(pl.col("d") > 0).then(pl.col("n") / pl.col("d")).otherwise(None)
        return (
            rest.filter(pl.col("value").is_not_null())
            .group_by("week_start", "metric")
            .agg(n=pl.col("numerator").sum(), d=pl.col("denominator").sum())
            .select("week_start", "metric", value=value)
        )
    return rest.group_by("week_start", "metric").agg(pl.col("value").mean())


def _draw(fig: Figure, rates: pl.DataFrame) -> None:
    weeks = sorted(rates["week_start"].unique().to_list())
    position = {week: i for i, week in enumerate(weeks)}
    drawn, pooled = busiest_surfaces(rates)
    series: list[tuple[str, dict[str, list[float]]]] = []  # (label, metric -> values by week)

    def add(label: str, frame: pl.DataFrame) -> None:
        values: dict[str, list[float]] = {}
        for week, metric, value in frame.select("week_start", "metric", "value").iter_rows():
            line = values.setdefault(metric, [math.nan] * len(weeks))
            line[position[week]] = math.nan if value is None else float(value)
        series.append((label, values))

    by_surface = rates.partition_by("surface", as_dict=True)
    for surface in drawn:
        add(legend_label(surface), by_surface[(surface,)])
    if pooled:
        add(f"other ({len(pooled)} surface{'s' if len(pooled) != 1 else ''})", _pooled(rates, pooled))

    axes = fig.subplots(2, 2, sharex=True, sharey=True, squeeze=False).ravel()
    step = max(1, math.ceil(len(weeks) / MAX_XTICK_LABELS))
    ticks = list(range(0, len(weeks), step))
    x = list(range(len(weeks)))
    handles: list[Line2D] = []
    for ax, metric in zip(axes, RATES):
        lines = []
        for i, (_, values) in enumerate(series):
            other = pooled and i == len(series) - 1
            style = {"color": "black", "linestyle": "--"} if other else {"color": f"C{i % 10}"}
            [line] = ax.plot(
                x, values.get(metric, [math.nan] * len(weeks)), marker="o", markersize=3, linewidth=1.5, **style
            )
            lines.append(line)
        handles = handles or lines
        ax.set_title(metric, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
        ax.set_xlim(-0.5, len(weeks) - 0.5)
        ax.set_xticks(ticks, [weeks[i].isoformat() for i in ticks], rotation=45, ha="right", fontsize=8)
        ax.tick_params(labelbottom=True)
        ax.grid(True, alpha=0.3)
    # labels passed explicitly: a label that starts with "_" would otherwise be dropped from the legend
    labels = [label for label, _ in series]
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5), frameon=False, fontsize=9)
