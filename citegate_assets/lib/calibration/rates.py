"""Calibration math (docs/support-gate.md, calibration; SPEC section 8): how often the judge says yes where a
human did not (false pass), and how often it does not say yes where a human did (false fail).

Pure polars over (human label, judge verdict) pairs; no I/O. Pairs with a `weight` column (own labels, drawn from a
stratified sample: lib/calibration/own_labels.py) give weighted rates, with Wilson's interval at the Kish effective
sample size.
A gate is enforced on own labels only (gate_status; docs/support-gate.md "Labels from your own traffic").

How verdicts count (docs/decisions.md, "Calibration scopes"):
- `error` is not a judgement: it is counted apart (`judge_errors`), in neither denominator. It is never queued
  either; the next run retries it.
- `unparseable` is a judgement that is not `yes`: on a human no/partial it is a negative judged without a false
  pass; on a human yes it is a false fail (the citation fails support and is queued as `judge_unparseable`).
- `partial` from the judge is a failure, like `no`: on a human yes it is a false fail.
- `undecided` (the screen's own word) and `unjudged` (undecided with no LLM judge configured) are answers that are not
  `yes`: on a human no/partial a negative without a false pass, on a human yes a false fail (an unjudged citation is
  queued as `support_unjudged`). A tier's coverage is the share of the labels it decided (tier_summary).
"""

from __future__ import annotations

import math

import polars as pl

Z95 = 1.959963984540054
SCOPES = {"no_or_partial": ("no", "partial"), "no": ("no",)}
POSITIVE = "yes"
VERDICT_ORDER = ("yes", "partial", "no", "unparseable", "undecided", "unjudged", "error")
NOT_DECIDED = ("undecided", "unjudged")  # an answer that leaves the pair to another tier, or to no one
# support_gate_status.judged_per_week: a surface's judged citations over the last JUDGED_WINDOW_DAYS UTC days the
# warehouse holds verdicts for (sql/support/judged_per_week.sql)
JUDGED_WINDOW_DAYS = 28


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """95% Wilson score interval of a proportion; (None, None) when there is nothing to estimate."""
    if n <= 0:
        return None, None
    return wilson_bounds(successes / n, n, z)


def wilson_bounds(p: float, n: float, z: float = Z95) -> tuple[float | None, float | None]:
    """The Wilson score interval of a proportion p measured on n (a whole count, or a weighted rate's effective
    sample size); (None, None) when n is not positive."""
    if n <= 0:
        return None, None
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p) / n + z * z / (4 * n * n))) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def share(frame: pl.DataFrame, hit: pl.Expr) -> dict:
    """Of the rows of `frame`, those where `hit` holds: counts, the rate and its 95% Wilson interval. With a `weight`
    column (own labels, lib/calibration/own_labels.py) the rate is the weighted share, and the interval is Wilson's at
    the
    Kish effective sample size n_eff = (sum w)^2 / sum w^2 (n itself when every weight is equal)."""
    n = frame.height
    k = frame.filter(hit).height
    if "weight" not in frame.columns:
        low, high = wilson_interval(k, n)
        return {"n": n, "k": k, "rate": k / n if n else None, "low": low, "high": high, "n_eff": float(n)}
    total = float(frame["weight"].sum()) if n else 0.0
    if total <= 0:
        return {"n": n, "k": k, "rate": None, "low": None, "high": None, "n_eff": 0.0}
    rate = float(frame.filter(hit)["weight"].sum()) / total
    n_eff = total * total / float((frame["weight"] ** 2).sum())
    low, high = wilson_bounds(rate, n_eff)
    return {"n": n, "k": k, "rate": rate, "low": low, "high": high, "n_eff": n_eff}


def confusion(pairs: pl.DataFrame) -> pl.DataFrame:
    """pairs: columns human_label, judge_verdict → one row per (human, judge) cell with its count."""
    return (
        pairs.group_by("human_label", "judge_verdict")
        .agg(n=pl.len().cast(pl.Int32))
        .sort("human_label", "judge_verdict")
    )


def false_fail_summary(pairs: pl.DataFrame, threshold: float, min_positives: int) -> dict:
    """The false fail rate: of the human-yes labels the judge answered (not `error`), the share it did not call
    `yes`. too_strict: the rate is over the threshold, on at least min_positives labels; None (unknown) on fewer."""
    positives = pairs.filter((pl.col("judge_verdict") != "error") & (pl.col("human_label") == POSITIVE))
    got = share(positives, pl.col("judge_verdict") != "yes")
    n, rate = got["n"], got["rate"]
    too_strict = None if n == 0 or n < min_positives or rate is None else rate > threshold
    return {
        "positives": n,
        "false_fails": got["k"],
        "false_fail_rate": rate,
        "false_fail_low": got["low"],
        "false_fail_high": got["high"],
        "false_fail_threshold": threshold,
        "min_positives": min_positives,
        "too_strict": too_strict,
        "effective_positives": got["n_eff"],
    }


def calibration_summary(
    pairs: pl.DataFrame,
    threshold: float,
    min_negatives: int,
    *,
    false_fail_threshold: float = 0.5,
    min_positives: int = 30,
) -> list[dict]:
    """One row per scope of negatives: the false pass rate on them, and (the same on every row: it does not depend
    on the scope) the false fail rate on the human-yes labels. With a `weight` column the rates are weighted
    (own labels: share())."""
    out = []
    judged = pairs.filter(pl.col("judge_verdict") != "error")
    errors = pairs.height - judged.height
    fails = false_fail_summary(pairs, false_fail_threshold, min_positives)
    for scope, labels in SCOPES.items():
        negatives = judged.filter(pl.col("human_label").is_in(list(labels)))
        got = share(negatives, pl.col("judge_verdict") == "yes")
        n, high = got["n"], got["high"]
        out.append(
            {
                "scope": scope,
                "labels": pairs.height,
                "negatives": n,
                "false_passes": got["k"],
                "false_pass_rate": got["rate"],
                "wilson_low": got["low"],
                "wilson_high": high,
                "judge_errors": errors,
                "threshold": threshold,
                "min_negatives": min_negatives,
                "calibrated": bool(high is not None and high < threshold and n >= min_negatives),
                "effective_negatives": got["n_eff"],
                **fails,
            }
        )
    return out


def tier_summary(pairs: pl.DataFrame) -> dict:
    """What one tier of the judge decided on its labels (human_label, judge_verdict): `decided` (a verdict other than
    undecided, unjudged or error), `coverage` (decided over the labels it answered, error excluded; with a `weight`
    column the weighted share, as share() does) and `said_no_on_yes` (human-yes labels it said no to: the screen's
    false fails, which never include what it leaves)."""
    answered = pairs.filter(pl.col("judge_verdict") != "error")
    got = share(answered, ~pl.col("judge_verdict").is_in(list(NOT_DECIDED)))
    said_no = answered.filter((pl.col("human_label") == POSITIVE) & (pl.col("judge_verdict") == "no")).height
    return {"decided": got["k"], "coverage": got["rate"], "said_no_on_yes": said_no}


def extra_queue_per_week(judged_per_week: float | None, false_fail_rate: float | None) -> float | None:
    """The queue entries a week that are true citations the judge failed, taking every judged citation as
    supported: judged citations per week × false fail rate. An upper estimate (the exact figure is the
    supported judged citations × the rate); None when either is unknown."""
    if judged_per_week is None or false_fail_rate is None:
        return None
    return judged_per_week * false_fail_rate


def _false_pass_why(main: dict | None) -> tuple[str, str]:
    if main is None or main["negatives"] == 0:
        return "uncalibrated", "no hand labels judged"
    if main["negatives"] < main["min_negatives"]:
        return "uncalibrated", f"{main['negatives']} negatives < {main['min_negatives']} required"
    n_eff = main.get("effective_negatives")
    effective = "" if n_eff is None or abs(n_eff - main["negatives"]) < 1e-9 else f" (effective n {n_eff:.1f})"
    if not main["calibrated"]:
        return (
            "uncalibrated",
            f"false pass upper bound {main['wilson_high']:.3f} >= threshold {main['threshold']}{effective}",
        )
    return (
        "enforced",
        f"false pass upper bound {main['wilson_high']:.3f} < {main['threshold']} on {main['negatives']} "
        f"negatives{effective}",
    )


def _false_fail_why(main: dict | None, extra: float | None, judged: float | None, yes_rate: float | None) -> str:
    """What the gate costs in true citations failed: the rate, its interval, the verdict on it and the queue."""
    if main is None or not main.get("positives"):
        return "false fail rate unknown: no human-yes labels judged"
    rate, n, k = main["false_fail_rate"], main["positives"], main["false_fails"]
    measured = f"false fail rate {rate:.3f} ({k} of {n} human-yes, 95% CI {main['false_fail_low']:.3f}-"
    measured += f"{main['false_fail_high']:.3f})"
    if main["too_strict"] is None:
        verdict = f"{measured}; too few human-yes labels to call it too strict ({n} < {main['min_positives']})"
    elif main["too_strict"]:
        verdict = f"too strict: {measured} > {main['false_fail_threshold']}"
    else:
        verdict = f"{measured} <= {main['false_fail_threshold']}"
    if judged is None:
        return f"{verdict}; no judged citations in the warehouse to size the queue"
    passed = "" if yes_rate is None else f", {yes_rate:.1%} of them passed by the judge"
    return f"{verdict}; ~{extra or 0:,.1f} true citations a week queued ({judged:,.1f} judged a week{passed})"


OWN, REFERENCE, NO_LABELS = "own", "reference", "none"
REFERENCE_ONLY = "uncalibrated (reference labels only)"
LABEL_HOW = "citegate label, or the review page's Label tab"
CONNECT_JUDGE = (
    'connect a judge (CITEGATE_JUDGE_BASE_URL; README "Connect a real judge") to decide what the offline judge cannot'
)
ASSUMED_NEGATIVE_SHARE = 0.5  # of own pairs, before 10 of them have been labelled


def origin_of(row: dict) -> str:
    """own | reference: the labels a calibration row rests on (a row from before schema 16 is reference)."""
    return row.get("label_origin") or REFERENCE


def _main_row(summary: list[dict], origin: str, surface: str | None) -> dict | None:
    return next(
        (
            row
            for row in summary
            if row["scope"] == "no_or_partial" and origin_of(row) == origin and row.get("surface") == surface
        ),
        None,
    )


def pairs_to_label(pooled: dict | None, min_negatives: int) -> int:
    """About how many more own pairs to label before the own labels, pooled over surfaces, hold min_negatives human
    no-or-partial labels: the shortfall over the share of negatives among own labels so far (0.5 before 10)."""
    have = pooled["negatives"] if pooled else 0
    need = max(0, min_negatives - have)
    if need == 0:
        return 0
    judged = have + (pooled.get("positives") or 0) if pooled else 0
    negative_share = have / judged if judged >= 10 and have > 0 else ASSUMED_NEGATIVE_SHARE
    return math.ceil(need / negative_share)


def _labels_basis(
    surface: str, here: dict | None, pooled: dict | None, reference: dict | None, min_negatives: int
) -> tuple[dict | None, str, bool, str]:
    """(the calibration row the status rests on, own | reference | none, pooled, why) for one surface: its own
    labels when they hold min_negatives negatives, else the own labels of every surface pooled when those do, else
    the reference labels."""
    own_here = here["negatives"] if here else 0
    if here is not None and own_here >= min_negatives:
        return here, OWN, False, f"own labels of {surface} (weighted to its traffic)"
    if pooled is not None and pooled["negatives"] >= min_negatives:
        why = f"own labels pooled over surfaces ({surface} has {own_here} own negatives < {min_negatives})"
        return pooled, OWN, True, why
    own_all = pooled["negatives"] if pooled else 0
    if reference is not None and (reference["negatives"] or reference.get("positives")):
        return reference, REFERENCE, False, f"reference labels only (own negatives {own_all} < {min_negatives})"
    if here is not None:
        return here, OWN, False, f"own labels of {surface} (weighted to its traffic)"
    if pooled is not None:
        return pooled, OWN, True, f"own labels pooled over surfaces ({surface} has none of its own)"
    return None, NO_LABELS, False, f"no labels (own negatives {own_all} < {min_negatives})"


def gate_status(
    surfaces: list[tuple[str, str]],
    summary: list[dict],
    judged_per_week: dict[str, float] | None = None,
    judged_yes_rate: dict[str, float | None] | None = None,
    *,
    judge_offline: bool = False,
    min_negatives: int = 30,
) -> list[dict]:
    """A surface's support gate is enforced only on own labels (sampled from this warehouse's traffic, weighted back
    to its mix): its own when it has min_negatives no-or-partial labels, else every surface's pooled (and said so),
    and only when the judge's false pass upper bound on them is under the threshold. On reference labels alone it
    is `uncalibrated (reference labels only)`, whatever they say. Every judged surface also carries what the gate
    costs: the false fail rate, too_strict, and the expected extra queue volume a week; and the next step.

    summary: judge_calibration rows (label_origin own | reference, surface: own per surface, null pooled).
    judged_per_week: surface -> judged citations a week (sql/support/judged_per_week.sql); None when the
    warehouse has no support verdicts at all (a surface missing from a given dict judged none: 0).
    judged_yes_rate: surface -> the share of those citations the judge called yes (shown beside the false fail
    rate: a judge that passes far fewer of a surface's citations than 1 - false_fail_rate of its supported ones
    says the hand labels do not look like that surface's traffic)."""
    pooled = _main_row(summary, OWN, None)
    reference = _main_row(summary, REFERENCE, None)
    least = next((row["min_negatives"] for row in summary if row.get("min_negatives") is not None), min_negatives)
    more = pairs_to_label(pooled, least)
    rows: list[dict] = []
    for surface, stakes in surfaces:
        if stakes == "off":
            rows.append(
                {
                    "surface": surface,
                    "stakes": stakes,
                    "status": "off",
                    "why": "stakes = off: deterministic checks only",
                    "judge_offline": judge_offline,
                }
            )
            continue
        here = _main_row(summary, OWN, surface)
        main, labels, is_pooled, basis = _labels_basis(surface, here, pooled, reference, least)
        status, why = _false_pass_why(main)
        if labels == REFERENCE:
            status = REFERENCE_ONLY
        elif labels == NO_LABELS:
            status = "uncalibrated"
        steps = []
        if more:
            steps.append(f"label about {more} more pairs ({LABEL_HOW})")
        elif status != "enforced":
            steps.append(f"label more pairs to narrow the false pass bound ({LABEL_HOW})")
        if judge_offline:
            steps.append(CONNECT_JUDGE)
        judged = None if judged_per_week is None else float(judged_per_week.get(surface, 0.0))
        rate = main.get("false_fail_rate") if main else None
        extra = extra_queue_per_week(judged, rate)
        yes_rate = (judged_yes_rate or {}).get(surface)
        rows.append(
            {
                "surface": surface,
                "stakes": stakes,
                "status": status,
                "why": f"{basis}: {why}; {_false_fail_why(main, extra, judged, yes_rate)}",
                "false_pass_upper": main["wilson_high"] if main else None,
                "negatives": main["negatives"] if main else 0,
                "positives": main.get("positives", 0) if main else 0,
                "false_fails": main.get("false_fails", 0) if main else 0,
                "false_fail_rate": rate,
                "false_fail_low": main.get("false_fail_low") if main else None,
                "false_fail_high": main.get("false_fail_high") if main else None,
                "too_strict": main.get("too_strict") if main else None,
                "judged_per_week": judged,
                "extra_queue_per_week": extra,
                "judged_yes_rate": yes_rate,
                "labels": labels,
                "pooled": is_pooled,
                "own_labels": (here["negatives"] + (here.get("positives") or 0)) if here else 0,
                "own_negatives": here["negatives"] if here else 0,
                "next_step": "; ".join(steps) or None,
                "judge_offline": judge_offline,
            }
        )
    return rows
