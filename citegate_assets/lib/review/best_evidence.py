"""Best available evidence (docs/review.md; SPEC section 6): for a citation that fails support, was the
cited passage the best evidence in the prompt? Rank the call's other passages by a cheap lexical coverage of the
claim (vectorized), judge the best few, and name the cause."""

from __future__ import annotations

import polars as pl

CAUSES = ("generation", "ranking_or_chunking", "no_evidence", "unknown")
# a verdict that says nothing about support: no judge could decide the pair (unjudged: the screen left it undecided
# with no LLM judge configured), or the judge failed (error); a cause never rests on guesswork about it
NOT_KNOWN = ("unjudged", "error")
_WORDS = r"[a-z0-9]+"


def claim_coverage(claim: pl.Expr, passage: pl.Expr) -> pl.Expr:
    """Share of the claim's distinct words that the passage contains: [0, 1], vectorized."""
    claim_words = claim.str.to_lowercase().str.extract_all(_WORDS).list.unique()
    passage_words = passage.str.to_lowercase().str.extract_all(_WORDS).list.unique()
    n = claim_words.list.len()
    return pl.when(n > 0).then(claim_words.list.set_intersection(passage_words).list.len() / n).otherwise(0.0)


def top_candidates(candidates: pl.DataFrame, k: int) -> pl.DataFrame:
    """candidates: citation_id, chunk_id, claim, passage (other sections of the same prompt) → best k per citation."""
    if k <= 0 or candidates.is_empty():
        return candidates.head(0).with_columns(coverage=pl.lit(0.0), candidate_rank=pl.lit(0, dtype=pl.UInt32))
    return (
        candidates.with_columns(coverage=claim_coverage(pl.col("claim"), pl.col("passage")))
        .sort(["citation_id", "coverage", "chunk_id"], descending=[False, True, False])
        .with_columns(candidate_rank=pl.col("chunk_id").cum_count().over("citation_id"))
        .filter(pl.col("candidate_rank") <= k)
    )


def decide_cause(
    cited_verdict: str | None, cited_numeric_ok: bool, candidates: list[dict], assessed: bool
) -> tuple[str | None, str | None, str | None]:
    """(cause, better_chunk_id, better_verdict).

    candidates: dicts with chunk_id, verdict, numeric_ok, coverage — already judged.
    - another passage fully supports the claim (yes, numbers included) → ranking_or_chunking;
    - the cited passage partly supports it (partial, or yes with a number it lacks), or the cited
      passage was not judged (sampled out) → generation: the model overreached or misread the passage it had;
    - another passage partly supports it while the cited one does not → ranking_or_chunking;
    - nothing in the prompt supports it → no_evidence.
    A verdict that is not known (NOT_KNOWN: unjudged, error) on the cited passage or on a candidate leaves open every
    cause it could change → unknown: a candidate might be the full support that makes it ranking_or_chunking, the
    cited passage might be the partial support that makes it generation.
    Not assessed (the surface's stakes are off: no judge by policy) → (None, None, None).
    """
    if not assessed:
        return None, None, None
    ordered = sorted(candidates, key=lambda c: -c["coverage"])
    full = [c for c in ordered if c["verdict"] == "yes" and c["numeric_ok"]]
    if full:
        return "ranking_or_chunking", full[0]["chunk_id"], "yes"
    open_candidates = any(c["verdict"] in NOT_KNOWN for c in ordered)
    if cited_verdict in NOT_KNOWN:
        return "unknown", None, None
    if cited_verdict in ("partial", None) or (cited_verdict == "yes" and not cited_numeric_ok):
        return ("unknown" if open_candidates else "generation"), None, None
    partial = [c for c in ordered if c["verdict"] in ("partial", "yes")]
    if partial:
        return "ranking_or_chunking", partial[0]["chunk_id"], partial[0]["verdict"]
    return ("unknown" if open_candidates else "no_evidence"), None, None
