"""The normalization function N (docs/prompts.md "Normalization"; SPEC section 3), as polars expressions.

One implementation serves the prompt, the spans, the claims and the retrieved chunk texts, so the
two sides of every comparison are normalized identically by construction.
"""

from __future__ import annotations

import sys
import unicodedata
from collections.abc import Callable, Sequence
from functools import cache

import polars as pl

from citegate_assets.lib.ingest.normalize_plain import (
    FOLD_FROM,
    FOLD_TO,
    HTML_CHARS,
    HTML_ENTITIES,
    NORMALIZATION_VERSION,
)

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

try:  # compiled at install when a C compiler is there (pyproject.toml ext-modules); the polars path otherwise
    import citegate_assets.lib.ingest._canonical as _compiled
except ImportError:  # pragma: no cover - where no compiler built it
    _compiled = None  # type: ignore[assignment]


# The code points NFC may change in a string (Unicode's NFC_Quick_Check No or Maybe, and every non-zero combining
# class), for UNICODE_VERSION: a string without any of them is NFC already. Hex ranges, computed by _nfc_suspects.
UNICODE_VERSION = "14.0.0"
NFC_SUSPECT_RANGES = (
    "300-34E 350-36F 374 37E 387 483-487 591-5BD 5BF 5C1-5C2 5C4-5C5 5C7 610-61A 64B-65F 670 6D6-6DC 6DF-6E4 "
    "6E7-6E8 6EA-6ED 711 730-74A 7EB-7F3 7FD 816-819 81B-823 825-827 829-82D 859-85B 898-89F 8CA-8E1 8E3-8FF 93C "
    "94D 951-954 958-95F 9BC 9BE 9CD 9D7 9DC-9DD 9DF 9FE A33 A36 A3C A4D A59-A5B A5E ABC ACD B3C B3E B4D B56-B57 "
    "B5C-B5D BBE BCD BD7 C3C C4D C55-C56 CBC CC2 CCD CD5-CD6 D3B-D3C D3E D4D D57 DCA DCF DDF E38-E3A E48-E4B "
    "EB8-EBA EC8-ECB F18-F19 F35 F37 F39 F43 F4D F52 F57 F5C F69 F71-F76 F78 F7A-F7D F80-F84 F86-F87 F93 F9D FA2 "
    "FA7 FAC FB5 FB7 FB9 FC6 102E 1037 1039-103A 108D 1161-1175 11A8-11C2 135D-135F 1714-1715 1734 17D2 17DD 18A9 "
    "1939-193B 1A17-1A18 1A60 1A75-1A7C 1A7F 1AB0-1ABD 1ABF-1ACE 1B34-1B35 1B44 1B6B-1B73 1BAA-1BAB 1BE6 1BF2-1BF3 "
    "1C37 1CD0-1CD2 1CD4-1CE0 1CE2-1CE8 1CED 1CF4 1CF8-1CF9 1DC0-1DFF 1F71 1F73 1F75 1F77 1F79 1F7B 1F7D 1FBB 1FBE "
    "1FC9 1FCB 1FD3 1FDB 1FE3 1FEB 1FEE-1FEF 1FF9 1FFB 1FFD 2000-2001 20D0-20DC 20E1 20E5-20F0 2126 212A-212B "
    "2329-232A 2ADC 2CEF-2CF1 2D7F 2DE0-2DFF 302A-302F 3099-309A A66F A674-A67D A69E-A69F A6F0-A6F1 A806 A82C A8C4 "
    "A8E0-A8F1 A92B-A92D A953 A9B3 A9C0 AAB0 AAB2-AAB4 AAB7-AAB8 AABE-AABF AAC1 AAF6 ABED F900-FA0D FA10 FA12 "
    "FA15-FA1E FA20 FA22 FA25-FA26 FA2A-FA6D FA70-FAD9 FB1D-FB1F FB2A-FB36 FB38-FB3C FB3E FB40-FB41 FB43-FB44 "
    "FB46-FB4E FE20-FE2F 101FD 102E0 10376-1037A 10A0D 10A0F 10A38-10A3A 10A3F 10AE5-10AE6 10D24-10D27 10EAB-10EAC "
    "10F46-10F50 10F82-10F85 11046 11070 1107F 110B9-110BA 11100-11102 11127 11133-11134 11173 111C0 111CA "
    "11235-11236 112E9-112EA 1133B-1133C 1133E 1134D 11357 11366-1136C 11370-11374 11442 11446 1145E 114B0 114BA "
    "114BD 114C2-114C3 115AF 115BF-115C0 1163F 116B6-116B7 1172B 11839-1183A 11930 1193D-1193E 11943 119E0 11A34 "
    "11A47 11A99 11C3F 11D42 11D44-11D45 11D97 16AF0-16AF4 16B30-16B36 16FF0-16FF1 1BC9E 1D15E-1D169 1D16D-1D172 "
    "1D17B-1D182 1D185-1D18B 1D1AA-1D1AD 1D1BB-1D1C0 1D242-1D244 1E000-1E006 1E008-1E018 1E01B-1E021 1E023-1E024 "
    "1E026-1E02A 1E130-1E136 1E2AE 1E2EC-1E2EF 1E8D0-1E8D6 1E944-1E94A 2F800-2FA1D "
)


@cache
def nfc_suspect_class() -> str:
    """A regex class of the code points NFC may change, for the running Python's Unicode tables."""
    return "[" + "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in _suspect_ranges()) + "]"


@cache
def _suspect_ranges() -> list[tuple[int, int]]:
    if unicodedata.unidata_version == UNICODE_VERSION:
        return [_hex_range(part) for part in NFC_SUSPECT_RANGES.split()]
    return _nfc_suspects()


def _hex_range(part: str) -> tuple[int, int]:
    lo, _, hi = part.partition("-")
    return int(lo, 16), int(hi or lo, 16)


def _nfc_suspects() -> list[tuple[int, int]]:
    """Scan every code point (~1 s): NFC changes it alone, it has a combining class, or it is the second of a
    canonical pair that composes (it may join the character before it; the Hangul vowels and trailing consonants
    compose by rule)."""
    found: set[int] = {*range(0x1161, 0x1176), *range(0x11A8, 0x11C3)}
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        if unicodedata.combining(c) or unicodedata.normalize("NFC", c) != c:
            found.add(cp)
        parts = unicodedata.decomposition(c).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            found.add(int(parts[1], 16))
    ranges: list[list[int]] = []
    for cp in sorted(found):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return [(lo, hi) for lo, hi in ranges]


def _changed_where(series: pl.Series, rows: pl.Series, change: Callable[[pl.Series], pl.Series]) -> pl.Series:
    """change applied to the rows of series where rows is true, the others as they are. Scatter writes into the series
    it is given."""
    at = rows.arg_true()
    if at.is_empty():
        return series
    return series.scatter(at, change(series.gather(at)))


def _nfc_where(series: pl.Series, rows: pl.Series) -> pl.Series:
    # CPython's NFC (quick-check fast path, ~1 GB/s; polars' is ~10x slower), on the rows that may change only:
    # converting every row to Python and back cost more than the NFC itself
    return _changed_where(series, rows, _nfc)


def _nfc(texts: pl.Series) -> pl.Series:
    return pl.Series([unicodedata.normalize("NFC", t) for t in texts.to_list()], dtype=pl.String)


def _canonical_series(series: pl.Series) -> pl.Series:
    # N is a function of the text: each distinct text once (a batch's retrieved chunks repeat across requests)
    distinct = series.unique(maintain_order=True)
    if len(distinct) > 0.8 * len(series):
        return _canonical_distinct(series)
    normalized = _canonical_distinct(distinct.clone())  # a clone: NFC is written into its input in place
    table = pl.DataFrame({"text": distinct, "normalized": normalized})
    rows = series.rename("text").to_frame()
    return rows.join(table, on="text", how="left", nulls_equal=True, maintain_order="left")["normalized"].rename(
        series.name
    )


def _canonical_distinct(series: pl.Series) -> pl.Series:
    if _compiled is None:
        return _canonical_general(series)
    return _canonical_compiled(series)


def _canonical_compiled(series: pl.Series) -> pl.Series:
    # one pass of compiled code over the column's UTF-8 bytes (~5x the polars steps), handed over both ways through
    # the Arrow PyCapsule interface (no pyarrow: a parse worker starts ~0.2 CPU-s sooner without it and numpy); the
    # rows with a code point NFC may change are left to the general path
    column, suspect_rows = _compiled.canonical_column(series.__arrow_c_stream__(), _suspect_bitmap())
    result = pl.Series(column).alias(series.name)  # the capsule carries no name
    if not suspect_rows:
        return result
    at = pl.Series(suspect_rows, dtype=pl.get_index_type())
    return result.scatter(at, _canonical_general(series.gather(at)))


@cache
def _suspect_bitmap() -> bytes:
    """A bit per code point, set for those NFC may change (nfc_suspect_class's)."""
    bits = bytearray((sys.maxunicode + 1) // 8)
    for lo, hi in _suspect_ranges():
        for cp in range(lo, hi + 1):
            bits[cp >> 3] |= 1 << (cp & 7)
    return bytes(bits)


def _canonical_general(series: pl.Series) -> pl.Series:
    # line endings need no step of their own: CR and LF are whitespace, which the last step collapses to one space,
    # and neither NFC nor the folding table touches them
    suspect = series.str.contains(nfc_suspect_class()).fill_null(False)
    folded = _nfc_where(series, suspect).str.replace_many(FOLD_FROM, FOLD_TO)
    # folding can remove a zero-width character or soft hyphen between a letter and its accent: compose again. It
    # only replaces characters by ASCII or removes them, so a row with nothing NFC may change still has nothing.
    return (
        _nfc_where(folded, suspect)
        # = \s+ → " ", but only rewrites runs of 2+ or a lone non-space whitespace: 4x faster
        .str.replace_all(r"\s{2,}|[^\S ]", " ")
        .str.strip_chars()
    )


def canonical(expr: pl.Expr) -> pl.Expr:
    """Steps 3-5: line endings, NFC, look-alike folding, whitespace collapse. Idempotent."""
    return expr.map_batches(_canonical_series, return_dtype=pl.String)


def unescape_html(expr: pl.Expr) -> pl.Expr:
    """Step 2 for profiles whose template HTML-escaped chunk text (mustache)."""
    return expr.str.replace_many(HTML_ENTITIES, HTML_CHARS)


def normalize(expr: pl.Expr, unescape: pl.Expr | str = "none") -> pl.Expr:
    """N: unescape what the profile says was escaped, then canonicalize.

    `unescape` is a profile's unescape mode, or a column holding it per row.
    """
    if isinstance(unescape, str):
        return canonical(unescape_html(expr) if unescape == "html" else expr)
    # the entities replaced on the html rows alone: when/then would replace them on every row, then choose
    return canonical(pl.map_batches([expr, unescape == "html"], _unescaped_where, return_dtype=pl.String))


def _unescaped_where(columns: Sequence[pl.Series]) -> pl.Series:
    texts, html = columns
    return _changed_where(texts.clone(), html.fill_null(False), _unescaped)


def _unescaped(texts: pl.Series) -> pl.Series:
    return texts.str.replace_many(HTML_ENTITIES, HTML_CHARS)


def normalize_text(text: str, unescape: str = "none") -> str:
    """N on one string (tests, CLI); the same expressions as the vectorized path."""
    return pl.select(normalize(pl.lit(text, dtype=pl.String), unescape)).item()


def normalize_texts(texts: list[str], unescape: str = "none") -> list[str]:
    return (
        pl.Series("t", texts, dtype=pl.String).to_frame().select(normalize(pl.col("t"), unescape)).to_series().to_list()
    )
