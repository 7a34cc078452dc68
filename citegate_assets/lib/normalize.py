"""The normalization function N (README "Normalization"; SPEC section 3), as polars expressions.

One implementation serves the prompt, the spans, the claims and the retrieved chunk texts, so the
two sides of every comparison are normalized identically by construction.
"""

from __future__ import annotations

import unicodedata

import polars as pl

from .normalize_plain import FOLD_FROM, FOLD_TO, HTML_CHARS, HTML_ENTITIES, NORMALIZATION_VERSION

__all__ = [
    "FOLD_FROM",
    "FOLD_TO",
    "HTML_CHARS",
    "HTML_ENTITIES",
    "NORMALIZATION_VERSION",
    "normalize",
    "normalize_text",
    "normalize_texts",
]


def _nfc(series: pl.Series) -> pl.Series:
    # CPython's NFC has a quick-check fast path (~1 GB/s on text that is already NFC); polars' is ~10x slower
    return pl.Series(
        series.name, [None if t is None else unicodedata.normalize("NFC", t) for t in series.to_list()], dtype=pl.String
    )


def canonical(expr: pl.Expr) -> pl.Expr:
    """Steps 3-5: line endings, NFC, look-alike folding, whitespace collapse. Idempotent."""
    return (
        expr.str.replace_all("\r\n", "\n", literal=True)
        .str.replace_all("\r", "\n", literal=True)
        .map_batches(_nfc, return_dtype=pl.String)
        .str.replace_many(FOLD_FROM, FOLD_TO)
        # folding can remove a zero-width character or soft hyphen between a letter and its accent: compose again
        .map_batches(_nfc, return_dtype=pl.String)
        # = \s+ → " ", but only rewrites runs of 2+ or a lone non-space whitespace: 4x faster
        .str.replace_all(r"\s{2,}|[^\S ]", " ")
        .str.strip_chars()
    )


def unescape_html(expr: pl.Expr) -> pl.Expr:
    """Step 2 for profiles whose template HTML-escaped chunk text (mustache)."""
    return expr.str.replace_many(HTML_ENTITIES, HTML_CHARS)


def normalize(expr: pl.Expr, unescape: pl.Expr | str = "none") -> pl.Expr:
    """N: unescape what the profile says was escaped, then canonicalize.

    `unescape` is a profile's unescape mode, or a column holding it per row.
    """
    if isinstance(unescape, str):
        return canonical(unescape_html(expr) if unescape == "html" else expr)
    return canonical(pl.when(unescape == "html").then(unescape_html(expr)).otherwise(expr))


def normalize_text(text: str, unescape: str = "none") -> str:
    """N on one string (tests, CLI); the same expressions as the vectorized path."""
    return pl.select(normalize(pl.lit(text, dtype=pl.String), unescape)).item()


def normalize_texts(texts: list[str], unescape: str = "none") -> list[str]:
    return (
        pl.Series("t", texts, dtype=pl.String).to_frame().select(normalize(pl.col("t"), unescape)).to_series().to_list()
    )
