"""`citegate estimate`: what judging a range of days would cost, before a backfill, without calling anything.

It applies the configured sampling policy per surface (the same salt and key as support_sample) to the
provenance-passing citations of the days, computes each selected citation's cache key for every judge model
(the configured one and every model in [judge.prices]), counts the pairs judge_cache already holds, and
estimates the tokens of the prompts the judge would receive for the rest:

- prompt tokens per call = ceil(characters of the rendered prompt / CHARS_PER_TOKEN) + MESSAGE_TOKENS, where the
  rendered prompt is the seed's template with the normalized passage and claim (exactly what is sent). No
  tokenizer is installed, so characters / 4 (OpenAI's rule of thumb for English text) stands in for one; the
  MESSAGE_TOKENS are the chat format's framing of one user message and the reply.
- completion tokens per call = [judge].max_tokens: an upper bound (the reply is one word, one or two tokens).
- cost = tokens x [judge.prices.MODEL] (USD per million); batch = online x [judge].batch_discount. A model
  without a price has no cost (shown null); the offline judge costs nothing.

The secondary judge ([judge.secondary]) has its own row, mode `secondary`: it is called on the stable hash sample
(lib/support/agreement.py agreement_key < sample_rate) of the citations the primary judges, one call per distinct pair
not
in judge_cache for its model, always online (judge_agreement calls it pair by pair), at its model's price. The
real run samples only pairs the primary answered (not `error`), so this is an upper bound when the primary fails.

`best_evidence` calls the judge too, on up to [queue] best_evidence_k other passages of the prompt per support
failure. Which citations fail is known only after the support gate has judged them, so each model has a row of
mode `best_evidence (max)`: the calls if every citation the gate judges failed, plus those that fail the numeric
check whether judged or not (an upper bound), on the candidates best_evidence would rank (lib/review/best_evidence.py
top_candidates over review/other_passages), less the pairs the support gate judges in the same run and those
judge_cache holds; always online (best evidence is not batched), at the model's price.

In a cascade ([judge] mode = "cascade" with an endpoint) the screen decides first and only what it leaves undecided
goes to the LLM judge: the screen is cheap and deterministic, so the estimate runs it on the distinct pairs (and on
best_evidence's candidates) and counts, for the LLM models, only the pairs it leaves; its own row (mode `screen
(cascade)`) shows the pairs it runs on, in process, at no cost.

The citations and their passages are the support gate's (lib/provenance/passages.py cited_passages: one streamed read of
the
range's prompts); sql/report/estimate_pairs.sql applies the policy and hashes them.

Pairs are counted once per range (a backfill runs the range as one run, and one run judges a pair once).
It reads what a run has gated: days ingested but not yet through the provenance gate are reported apart, not
estimated. It reads the published copy (cli/tool_commands.py), never the working file a run may be writing.
"""

from __future__ import annotations

import hashlib
import math
from datetime import date, timedelta

import duckdb
import polars as pl

from citegate_assets.lib.config import Config
from citegate_assets.lib.core.processes import map_rows
from citegate_assets.lib.core.terminal import safe
from citegate_assets.lib.provenance.passages import cited_passages, other_passages
from citegate_assets.lib.reporting import text_table
from citegate_assets.lib.review.best_evidence import top_candidates
from citegate_assets.lib.storage.warehouse import query
from citegate_assets.lib.support.agreement import agreement_key
from citegate_assets.lib.support.judge.base import Judge, JudgeRequest
from citegate_assets.lib.support.judge.prompt import TEMPLATE_VERSION, render_prompt
from citegate_assets.lib.support.judge.tiers import TO_LLM
from citegate_assets.lib.support.numbers import numeric_piece
from citegate_assets.lib.support.policies import registered_policies
from citegate_assets.lib.support.sampling import SALT

CHARS_PER_TOKEN = 4
EVIDENCE_MODE = "best_evidence (max)"
SCREEN_MODE = "screen (cascade)"
MESSAGE_TOKENS = 7  # the chat format around one user message and the assistant's reply
FRAME_CHARS = len(render_prompt("", ""))  # the template's own text around the passage and the claim

PAIR_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "citation_id": pl.String,
    "surface": pl.String,
    "stakes": pl.String,
    "sample_rate": pl.Float64,
    "selected": pl.Boolean,
    "passage_sha256": pl.String,
    "claim_sha256": pl.String,
    "passage_chars": pl.Int64,
    "claim_chars": pl.Int64,
}


def prompt_tokens(passage_chars: int, claim_chars: int) -> int:
    """The estimated prompt tokens of one judge call (see the module's docstring)."""
    return math.ceil((FRAME_CHARS + passage_chars + claim_chars) / CHARS_PER_TOKEN) + MESSAGE_TOKENS


def _key(model: str, passage_sha256: str, claim_sha256: str) -> str:
    """lib/support/judging.py's cache_key from the two hashes."""
    text = "\x1f".join((model, TEMPLATE_VERSION, passage_sha256, claim_sha256))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def default_range(con: duckdb.DuckDBPyConnection) -> tuple[date, date] | None:
    """[first day, last day + 1) of the citations in the warehouse; None when it holds none."""
    [row] = query(con, "report/estimate_range").fetchall()
    if row[0] is None:
        return None
    first: date = row[0]
    last: date = row[1]
    return first, last + timedelta(days=1)


def selected_pairs(
    con: duckdb.DuckDBPyConnection, config: Config, start: date, end: date, passages: pl.DataFrame | None = None
) -> pl.DataFrame:
    """One row per provenance-passing citation of [start, end) with its surface's policy applied, ordered by
    citation_id: the support gate's citations and passages (lib/provenance/passages.py, one read of the prompts; or
    passages,
    read already) keyed and sampled in sql/report/estimate_pairs.sql. Where retention removed the text, the hashes
    and lengths are null."""
    if passages is None:
        passages = cited_passages(con, start, end)
    passages = passages.select("citation_id", "surface", "claim", "passage")
    if passages.is_empty():
        return pl.DataFrame(schema=PAIR_SCHEMA)
    with registered_policies(con, config, start, end):
        con.register("estimate_passages", passages.to_arrow())
        try:
            pairs = query(con, "report/estimate_pairs", {"salt": SALT}).pl()
        finally:
            con.unregister("estimate_passages")
    return pairs.cast(PAIR_SCHEMA)


def estimate(
    con: duckdb.DuckDBPyConnection,
    config: Config,
    start: date,
    end: date,
    models: dict[str, bool],
    configured: str,
    secondary: tuple[str, bool] | None = None,
    screen: Judge | None = None,
) -> dict[str, pl.DataFrame]:
    """models: judge model -> offline (costs nothing, no batch); secondary: the [judge.secondary] judge's model and
    whether it is offline, or None; screen: the cascade's screen (the LLM models are then counted only on the pairs
    it leaves undecided), or None. Returns the frames `days`, `surfaces` (for the configured model), `models` (one
    row per model and mode, the secondary's last) and `screen` (pairs, decided: one row; empty without a screen)."""
    days = query(con, "report/estimate_days", {"start": start, "end": end}).pl()
    passages = cited_passages(con, start, end)
    pairs = selected_pairs(con, config, start, end, passages)
    # a day whose text retention removed is never gated again (a run refuses it): nothing to estimate there
    without_text = pairs.filter(pl.col("passage_sha256").is_null() | pl.col("claim_sha256").is_null())
    pairs = pairs.filter(pl.col("passage_sha256").is_not_null() & pl.col("claim_sha256").is_not_null())
    chosen = pairs.filter(pl.col("selected"))
    distinct = chosen.unique(["passage_sha256", "claim_sha256"], keep="first", maintain_order=True)
    tokens = [prompt_tokens(p, c) for p, c in zip(distinct["passage_chars"], distinct["claim_chars"])]
    distinct = distinct.with_columns(prompt_tokens=pl.Series(tokens, dtype=pl.Int64))
    judge = config.judge
    evidence = evidence_pairs(con, config, passages, pairs, start, end, screen=screen)
    screened = pl.DataFrame(schema={"pairs": pl.Int64, "decided": pl.Int64})
    to_llm = distinct
    if screen is not None:
        texts = distinct.join(passages.select("citation_id", "passage", "claim"), on="citation_id", how="left")
        decided = _screen_decides(screen, texts["passage"].to_list(), texts["claim"].to_list())
        to_llm = distinct.filter(~pl.Series(decided, dtype=pl.Boolean))
        screened = pl.DataFrame({"pairs": [distinct.height], "decided": [sum(decided)]}, schema=screened.schema)
        rows_screen = [_calls_row(config, screen.model, SCREEN_MODE, True, distinct.height, distinct)]
    surfaces = None
    rows = []
    for model, offline in models.items():
        cached, fresh = _uncached(con, distinct if offline else to_llm, model)
        calls = fresh.height
        prompt = int(fresh["prompt_tokens"].sum()) if calls else 0
        completion = calls * int(judge.max_tokens)
        online = _cost(config, model, offline, prompt, completion)
        modes = [("offline", online)] if offline else [("online", online)]
        if not offline:
            modes.append(("batch", None if online is None else online * float(judge.batch_discount)))
        configured_modes = (judge.mode, "offline") if judge.mode != "cascade" else ("online", "offline")
        for mode, cost in modes:
            rows.append(
                {
                    "judge_model": model,
                    "mode": mode + (" *" if model == configured and mode in configured_modes else ""),
                    "pairs": distinct.height if offline else to_llm.height,
                    "cached": (distinct.height if offline else to_llm.height) - calls,
                    "calls": calls,
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "cost_usd": None if cost is None else round(cost, 4),
                }
            )
        rows.append(_evidence_row(con, config, evidence, distinct, model, offline))
        if model == configured:
            surfaces = _by_surface(pairs, model, cached)
    if secondary is not None and judge.secondary is not None:
        rows.append(_secondary_row(con, config, chosen, *secondary))
    if screen is not None:
        rows = rows_screen + rows
    return {
        "screen": screened,
        "days": days,
        "without_text": pl.DataFrame({"citations": [without_text.height]}, schema={"citations": pl.Int64}),
        "surfaces": surfaces if surfaces is not None else _by_surface(pairs, configured, set()),
        "models": pl.DataFrame(
            rows,
            schema={
                "judge_model": pl.String,
                "mode": pl.String,
                "pairs": pl.Int64,
                "cached": pl.Int64,
                "calls": pl.Int64,
                "prompt_tokens": pl.Int64,
                "completion_tokens": pl.Int64,
                "cost_usd": pl.Float64,
            },
        ),
    }


def evidence_pairs(
    con: duckdb.DuckDBPyConnection,
    config: Config,
    passages: pl.DataFrame,
    pairs: pl.DataFrame,
    start: date,
    end: date,
    *,
    screen: Judge | None = None,
) -> pl.DataFrame:
    """The distinct (passage, claim) pairs best_evidence would judge if every citation the support gate judges
    failed: those citations and the ones whose claim has a number their passage lacks (a failure, judged or not), of
    surfaces whose stakes are not off, each with its best [queue] best_evidence_k other passages; with a cascade's
    screen, only those it leaves undecided. Columns: passage_sha256, claim_sha256, passage_chars, claim_chars,
    prompt_tokens (as PAIR_SCHEMA)."""
    k = int(config.queue.best_evidence_k)
    present = passages.filter(pl.col("passage").is_not_null() & pl.col("claim").is_not_null())
    assessed = [s for s in present["surface"].unique().to_list() if config.surface(s).stakes != "off"]
    present = present.filter(pl.col("surface").is_in(assessed))
    missing = [m for _, m in map_rows(numeric_piece, [present["claim"], present["passage"]], 1)]
    selected = pairs.filter("selected")["citation_id"]
    failing = present.filter(
        pl.col("citation_id").is_in(selected.implode()) | pl.Series([bool(m) for m in missing], dtype=pl.Boolean)
    )
    empty = pl.DataFrame(schema={**{c: PAIR_SCHEMA[c] for c in PAIR_SCHEMA if "sha256" in c or "chars" in c}})
    if k <= 0 or failing.is_empty():
        return empty.with_columns(prompt_tokens=pl.lit(0, pl.Int64)).head(0)
    chunks = query(con, "report/estimate_cited_chunks", {"start": start, "end": end}).pl()
    failures = failing.select("citation_id", "request_id", "day", "claim").join(chunks, on="citation_id")
    best = top_candidates(other_passages(con, failures, start, end), k)
    distinct = best.unique(["passage", "claim"], keep="first", maintain_order=True)
    if screen is not None:
        decided = _screen_decides(screen, distinct["passage"].to_list(), distinct["claim"].to_list())
        distinct = distinct.filter(~pl.Series(decided, dtype=pl.Boolean))
    passage, claim = distinct["passage"].to_list(), distinct["claim"].to_list()
    return pl.DataFrame(
        {
            "passage_sha256": [_sha(p) for p in passage],
            "claim_sha256": [_sha(c) for c in claim],
            "passage_chars": [len(p) for p in passage],
            "claim_chars": [len(c) for c in claim],
            "prompt_tokens": [prompt_tokens(len(p), len(c)) for p, c in zip(passage, claim)],
        },
        schema={**empty.schema, "prompt_tokens": pl.Int64},
    )


def _screen_decides(screen: Judge, passages: list[str | None], claims: list[str | None]) -> list[bool]:
    """Whether the cascade's screen decides each pair (yes or no): what it decides never reaches the LLM judge."""
    requests = [JudgeRequest(str(i), p or "", c or "") for i, (p, c) in enumerate(zip(passages, claims))]
    return [r.verdict not in TO_LLM for r in screen.judge(requests)] if requests else []


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _evidence_row(
    con: duckdb.DuckDBPyConnection,
    config: Config,
    evidence: pl.DataFrame,
    judged: pl.DataFrame,
    model: str,
    offline: bool,
) -> dict:
    """best_evidence's calls at most (evidence_pairs), less the support gate's own pairs (judged: cached by the time
    best_evidence runs) and what judge_cache holds; online."""
    gate = judged.select("passage_sha256", "claim_sha256")
    extra = evidence.join(gate, on=["passage_sha256", "claim_sha256"], how="anti")
    _, fresh = _uncached(con, extra, model)
    return _calls_row(config, model, EVIDENCE_MODE, offline, evidence.height, fresh)


def _calls_row(config: Config, model: str, mode: str, offline: bool, pairs: int, fresh: pl.DataFrame) -> dict:
    """One row of the per-model table: `pairs` distinct pairs, `fresh` those not cached (with prompt_tokens)."""
    calls = fresh.height
    prompt = int(fresh["prompt_tokens"].sum()) if calls else 0
    completion = calls * int(config.judge.max_tokens)
    cost = _cost(config, model, offline, prompt, completion)
    return {
        "judge_model": model,
        "mode": mode,
        "pairs": pairs,
        "cached": pairs - calls,
        "calls": calls,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost_usd": None if cost is None else round(cost, 4),
    }


def _secondary_row(
    con: duckdb.DuckDBPyConnection, config: Config, chosen: pl.DataFrame, model: str, offline: bool
) -> dict:
    """The [judge.secondary] judge's calls: the agreement sample of the chosen citations, distinct pairs, uncached."""
    judge = config.judge
    assert judge.secondary is not None
    rate = float(judge.secondary.sample_rate)
    in_sample = pl.Series([agreement_key(c) < rate for c in chosen["citation_id"]], dtype=pl.Boolean)
    sampled = chosen.filter(in_sample).unique(["passage_sha256", "claim_sha256"], keep="first", maintain_order=True)
    _, fresh = _uncached(con, sampled, model)
    tokens = [prompt_tokens(p, c) for p, c in zip(fresh["passage_chars"], fresh["claim_chars"])]
    fresh = fresh.with_columns(prompt_tokens=pl.Series(tokens, dtype=pl.Int64))
    return _calls_row(config, model, "secondary", offline, sampled.height, fresh)


def _uncached(con: duckdb.DuckDBPyConnection, pairs: pl.DataFrame, model: str) -> tuple[set[str], pl.DataFrame]:
    """The cache keys of `pairs` already in judge_cache for `model`, and the pairs that would be called."""
    keys = [_key(model, p, c) for p, c in zip(pairs["passage_sha256"], pairs["claim_sha256"])]
    cached = _cached(con, keys)
    return cached, pairs.filter(pl.Series([k not in cached for k in keys], dtype=pl.Boolean))


def _cost(config: Config, model: str, offline: bool, prompt: int, completion: int) -> float | None:
    """USD at the model's [judge.prices] (None when unpriced); an offline judge costs nothing."""
    price = config.judge.prices.get(model)
    if offline:
        return 0.0
    if price is None:
        return None
    return (prompt * float(price["input"]) + completion * float(price["output"])) / 1e6


def _cached(con: duckdb.DuckDBPyConnection, keys: list[str]) -> set[str]:
    if not keys:
        return set()
    con.register("wanted_keys", pl.DataFrame({"cache_key": keys}, schema={"cache_key": pl.String}).to_arrow())
    try:
        return {k for (k,) in query(con, "report/estimate_cached").fetchall()}
    finally:
        con.unregister("wanted_keys")


def _by_surface(pairs: pl.DataFrame, model: str, cached: set[str]) -> pl.DataFrame:
    keys = [_key(model, p, c) for p, c in zip(pairs["passage_sha256"], pairs["claim_sha256"])]
    marked = pairs.with_columns(is_cached=pl.Series(keys, dtype=pl.String).is_in(list(cached)) & pl.col("selected"))
    return (
        marked.group_by("surface", "stakes", "sample_rate")
        .agg(
            citations=pl.len(),
            judged=pl.col("selected").sum(),
            cached=pl.col("is_cached").sum(),
        )
        .with_columns(to_judge=pl.col("judged") - pl.col("cached"))
        .sort("surface")
    )


def render(result: dict[str, pl.DataFrame], start: date, end: date, configured: str, mode: str) -> str:
    days, surfaces, models = result["days"], result["surfaces"], result["models"]
    without_text = int(result["without_text"]["citations"][0]) if "without_text" in result else 0
    ingested = int(days["citations"].sum()) if days.height else 0
    gated = int(days["gated"].sum()) if days.height else 0
    last = end - timedelta(days=1)
    screened = result.get("screen")
    cascade = []
    if screened is not None and screened.height:
        n, decided = int(screened["pairs"][0]), int(screened["decided"][0])
        cascade = [
            "",
            f'Cascade ([judge] mode = "cascade"): the screen decides {decided:,} of the {n:,} distinct pairs in '
            f"process ({decided / n if n else 0:.1%} of the LLM calls saved)",
            "  the LLM rows count only the pairs it leaves undecided (the screen ran on them now; it is cheap and "
            "deterministic); best_evidence's candidates likewise",
        ]
    lines = [
        f"Estimate for {start} .. {last} ({days.height} day(s) with citations in the warehouse): nothing was called.",
        f"  citations ingested {ingested:,}, through the provenance gate {gated:,}"
        + (f"; {ingested - gated:,} not yet gated are not estimated (run them first)" if ingested > gated else "")
        + (
            f"; {without_text:,} of days whose text was removed ([retention] text_days) are not estimated (a run "
            "does not gate those days again)"
            if without_text
            else ""
        ),
        "",
        f"Per surface (sampling policy of the config; cached for the configured judge {safe(configured)}):",
        text_table(surfaces, max_rows=200),
        "",
        "Per judge model and mode (* = the configured judge and mode; pairs = distinct passage-claim pairs judged, "
        f"calls = pairs not in judge_cache; {EVIDENCE_MODE} = best_evidence's extra calls if every judged citation "
        "failed support, an upper bound, online in either mode"
        + (
            "; secondary = [judge.secondary] on its sample_rate of the judged citations, online)"
            if (models["mode"] == "secondary").any()
            else ")"
        )
        + ":",
        text_table(models, max_rows=200),
        *cascade,
        "",
        f"Tokens: prompt = ceil(characters of the rendered prompt / {CHARS_PER_TOKEN}) + {MESSAGE_TOKENS} per call "
        "(no tokenizer: an approximation); completion = [judge].max_tokens per call (an upper bound). "
        "Cost: [judge.prices]; batch = online x [judge].batch_discount; null = no price for that model.",
    ]
    return "\n".join(lines)
