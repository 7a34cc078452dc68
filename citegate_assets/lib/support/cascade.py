"""Judging through the tiers (lib/support/judge/tiers.py): the screen, the LLM judge, or the screen then the LLM.

Each tier goes through the cache (lib/support/judging.py judge_items), keyed by its own model, so a re-run asks neither
again. A row's `decided_by` says which tier's verdict stands:
- `screen`: the screen said yes or no (with no endpoint, also the three-way offline judges' verdicts);
- `llm`: the LLM judge's verdict on a pair the screen left undecided (cascade), or on every pair (online, batch);
- null: `unjudged` (the screen left it undecided and no LLM judge is configured: never a pass, never cached, queued as
  support_unjudged) or `error` (never a pass; retried on the next run).
A pair the screen could not judge (`error`) goes to the LLM judge like an undecided one. `screen_verdict` keeps the
screen's own answer for calibration per tier.

The share of LLM calls the screen saved is the screen-decided rows over the rows the cascade judged (screen-decided
and sent to the LLM judge); the cost saved is the screen-decided rows times the mean cost of the LLM judge's priced
verdicts of the same rows ([judge.prices]; a cached verdict carries the cost of its call). Both are measured on the
run's rows (cascade_savings), so a re-run reports what the cascade saves on those days, not what it paid.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from citegate_assets.lib.support.judge.base import UNDECIDED, UNJUDGED
from citegate_assets.lib.support.judge.tiers import TO_LLM, JudgeTiers
from citegate_assets.lib.support.judging import RESULT_SCHEMA, SideBySide, judge_items
from citegate_assets.lib.support.judging import Connect as Connect

TIERED_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    **RESULT_SCHEMA,
    "decided_by": pl.String,
    "screen_verdict": pl.String,
}
# judge the pairs an LLM tier gets: (items) -> (one result row per item, in order; facts with judge_calls)
LlmRunner = Callable[[pl.DataFrame], tuple[pl.DataFrame, dict]]


def unjudged_answer(screen_model: str) -> str:
    return f"undecided by {screen_model}, and no LLM judge is configured ([judge] base_url): not judged"


def judge_tiered(
    connect: Connect,
    items: pl.DataFrame,
    tiers: JudgeTiers,
    prices: dict,
    *,
    progress: Callable[[int, int], None] | None = None,
    side_by_side: SideBySide | None = None,
    llm_runner: LlmRunner | None = None,
) -> tuple[pl.DataFrame, dict]:
    """items: item_id, passage, claim (normalized). One result row per item, in order (TIERED_SCHEMA), and the run's
    facts. llm_runner: how the LLM tier's pairs are judged (the Batch API); default judge_items online."""

    def run_llm(part: pl.DataFrame) -> tuple[pl.DataFrame, dict]:
        assert tiers.llm is not None
        if llm_runner is not None:
            return llm_runner(part)
        return judge_items(connect, part, tiers.llm, prices, progress=progress, side_by_side=side_by_side)

    screen_calls = llm_calls = 0
    if tiers.screen is None:
        results, llm_facts = run_llm(items)
        llm_calls = llm_facts["judge_calls"]
        out = results.with_columns(
            decided_by=pl.when(pl.col("verdict") != "error").then(pl.lit("llm")).otherwise(pl.lit(None, pl.String)),
            screen_verdict=pl.lit(None, pl.String),
        )
        return _finish(out, tiers, screen_calls, llm_calls, llm_facts)

    screened, facts = judge_items(connect, items, tiers.screen, prices, progress=progress, side_by_side=side_by_side)
    screen_calls = facts["judge_calls"]
    verdicts = screened["verdict"].to_list()
    rest = [i for i, v in enumerate(verdicts) if v in TO_LLM] if tiers.llm is not None else []
    rest_rows: dict[int, dict] = {}
    rest_facts: dict = {}
    if rest:
        judged, rest_facts = run_llm(items[rest])
        llm_calls = rest_facts["judge_calls"]
        rest_rows = dict(zip(rest, judged.iter_rows(named=True)))
    rows = []
    for i, row in enumerate(screened.iter_rows(named=True)):
        own = row["verdict"]
        if i in rest_rows:
            row = rest_rows[i]
            decided = "llm" if row["verdict"] != "error" else None
        elif own == UNDECIDED:  # no LLM judge: not judged, never a pass
            row = {**row, "verdict": UNJUDGED, "raw_answer": unjudged_answer(row["judge_model"])}
            decided = None
        else:
            decided = "screen" if own != "error" else None
        rows.append({**row, "decided_by": decided, "screen_verdict": own})
    out = pl.DataFrame(rows, schema=TIERED_SCHEMA) if rows else pl.DataFrame(schema=TIERED_SCHEMA)
    return _finish(out, tiers, screen_calls, llm_calls, rest_facts)


def _finish(
    out: pl.DataFrame, tiers: JudgeTiers, screen_calls: int, llm_calls: int, llm_facts: dict
) -> tuple[pl.DataFrame, dict]:
    out = out.select(list(TIERED_SCHEMA)).cast(dict(TIERED_SCHEMA))  # type: ignore[arg-type]
    screen_model = tiers.screen.model if tiers.screen is not None else None
    facts = {
        **{k: v for k, v in llm_facts.items() if k.startswith("batch")},  # the Batch API's own counts
        "items": out.height,
        "cache_hits": int(out["cache_hit"].sum() or 0),
        "judge_calls": screen_calls + llm_calls,
        "screen_calls": screen_calls,
        "llm_calls": llm_calls,
        "errors": int((out["verdict"] == "error").sum()),
        "unjudged": int((out["verdict"] == UNJUDGED).sum()),
        **cascade_savings(out, screen_model, cascade=tiers.tier == "cascade"),
    }
    return out, facts


def cascade_savings(rows: pl.DataFrame, screen_model: str | None, *, cascade: bool) -> dict:
    """rows: judge_model, verdict, decided_by, cost_usd (support_verdicts, or judge_tiered's result).
    screen_decided: rows the screen decided; sent_to_llm: rows of the LLM tier (its verdicts and its errors);
    llm_calls_saved_share = screen_decided / (screen_decided + sent_to_llm), for a cascade (else None);
    cost_saved_usd = screen_decided x the mean cost of the LLM tier's priced rows (None when none is priced)."""
    screen_decided = int((rows["decided_by"] == "screen").sum())
    llm_error = (pl.col("verdict") == "error") & (pl.col("judge_model") != (screen_model or ""))
    llm_tier = rows.filter((pl.col("decided_by") == "llm") | (llm_error if cascade else pl.lit(False)))
    sent = llm_tier.height
    judged = screen_decided + sent
    priced = llm_tier.filter(pl.col("decided_by") == "llm")["cost_usd"].drop_nulls()
    mean_cost = float(priced.mean()) if priced.len() else None  # type: ignore[arg-type]
    return {
        "screen_decided": screen_decided,
        "sent_to_llm": sent,
        "llm_calls_saved_share": (screen_decided / judged if judged else None) if cascade else None,
        "cost_saved_usd": (screen_decided * mean_cost if mean_cost is not None else None) if cascade else None,
    }


def cascade_line(facts: dict) -> str:
    """The cascade's savings in one line (the run log and the run summary)."""
    share, cost = facts.get("llm_calls_saved_share"), facts.get("cost_saved_usd")
    judged = facts["screen_decided"] + facts["sent_to_llm"]
    text = (
        f"cascade: the screen decided {facts['screen_decided']:,} of {judged:,} judged citations, "
        f"{facts['sent_to_llm']:,} went to the LLM judge"
    )
    if share is not None:
        text += f"; LLM calls saved {share:.1%}"
    if cost is not None:
        text += f", cost saved ~${cost:,.4f} (at the LLM judge's mean cost per verdict, [judge.prices])"
    elif share is not None:
        text += "; cost saved unknown (no [judge.prices] entry for the LLM judge's model)"
    return text
