"""Calibration math (README "The support gate", calibration; SPEC section 8): how often the judge says yes where a
human did not.

Pure polars over (human label, judge verdict) pairs; no I/O.
"""

from __future__ import annotations

import math

import polars as pl

Z95 = 1.959963984540054
SCOPES = {"no_or_partial": ("no", "partial"), "no": ("no",)}
VERDICT_ORDER = ("yes", "partial", "no", "unparseable", "error")


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """95% Wilson score interval of a proportion; (None, None) when there is nothing to estimate."""
    if n <= 0:
        return None, None
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def confusion(pairs: pl.DataFrame) -> pl.DataFrame:
    """pairs: columns human_label, judge_verdict → one row per (human, judge) cell with its count."""
    return (
        pairs.group_by("human_label", "judge_verdict")
        .agg(n=pl.len().cast(pl.Int32))
        .sort("human_label", "judge_verdict")
    )


def false_pass_summary(pairs: pl.DataFrame, threshold: float, min_negatives: int) -> list[dict]:
    """One row per scope. A judge `error` is not a judgement: those labels are counted apart, not as negatives judged.
    `unparseable` is a judgement that is not yes, so it counts as a negative judged without a false pass."""
    out = []
    judged = pairs.filter(pl.col("judge_verdict") != "error")
    errors = pairs.height - judged.height
    for scope, labels in SCOPES.items():
        negatives = judged.filter(pl.col("human_label").is_in(list(labels)))
        n = negatives.height
        k = negatives.filter(pl.col("judge_verdict") == "yes").height
        low, high = wilson_interval(k, n)
        out.append(
            {
                "scope": scope,
                "labels": pairs.height,
                "negatives": n,
                "false_passes": k,
                "false_pass_rate": k / n if n else None,
                "wilson_low": low,
                "wilson_high": high,
                "judge_errors": errors,
                "threshold": threshold,
                "min_negatives": min_negatives,
                "calibrated": bool(high is not None and high < threshold and n >= min_negatives),
            }
        )
    return out


def gate_status(surfaces: list[tuple[str, str]], summary: list[dict]) -> list[dict]:
    """A surface's support gate is enforced only when the judge is calibrated on no-or-partial negatives."""
    main = next((row for row in summary if row["scope"] == "no_or_partial"), None)
    rows: list[dict] = []
    for surface, stakes in surfaces:
        if stakes == "off":
            rows.append(
                {
                    "surface": surface,
                    "stakes": stakes,
                    "status": "off",
                    "why": "stakes = off: deterministic checks only",
                }
            )
            continue
        if main is None or main["negatives"] == 0:
            status, why = "uncalibrated", "no hand labels judged"
        elif main["negatives"] < main["min_negatives"]:
            status, why = "uncalibrated", f"{main['negatives']} negatives < {main['min_negatives']} required"
        elif not main["calibrated"]:
            status, why = (
                "uncalibrated",
                f"false pass upper bound {main['wilson_high']:.3f} >= threshold {main['threshold']}",
            )
        else:
            status, why = (
                "enforced",
                f"false pass upper bound {main['wilson_high']:.3f} < {main['threshold']} "
                f"on {main['negatives']} negatives",
            )
        rows.append(
            {
                "surface": surface,
                "stakes": stakes,
                "status": status,
                "why": why,
                "false_pass_upper": main["wilson_high"] if main else None,
                "negatives": main["negatives"] if main else 0,
            }
        )
    return rows
