"""N (docs/prompts.md; SPEC section 3) on one string in plain Python, for the serving-path guard: no polars
there.

Same steps and tables as the vectorized N in lib/ingest/normalize.py (which takes its tables from here);
tests/test_normalize_plain.py holds the two equal on arbitrary text.
"""

from __future__ import annotations

import re
import unicodedata

NORMALIZATION_VERSION = "n1"

# Step 2: entities a template engine escaped, replaced in one leftmost pass ("&amp;lt;" -> "&lt;").
HTML_ENTITIES = ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;", "&#x27;"]
HTML_CHARS = ["&", "<", ">", '"', "'", "'"]

# Step 4: typographic look-alikes that models rewrite when quoting, folded to ASCII on both sides.
FOLD_FROM = [
    "\u2018",
    "\u2019",
    "\u201a",
    "\u201b",
    "\u2032",  # single quotes, prime
    "\u201c",
    "\u201d",
    "\u201e",
    "\u201f",
    "\u2033",  # double quotes, double prime
    "\u2010",
    "\u2011",
    "\u2012",
    "\u2013",
    "\u2014",
    "\u2015",
    "\u2212",  # hyphens, dashes, minus
    "\u2026",  # ellipsis
    "\u00a0",
    "\u202f",
    "\u2007",
    "\u2009",
    "\u200a",  # no-break and thin spaces
    "\u200b",
    "\u200c",
    "\u200d",
    "\u2060",
    "\ufeff",  # zero-width characters
    "\u00ad",  # soft hyphen
]
FOLD_TO = [
    "'",
    "'",
    "'",
    "'",
    "'",
    '"',
    '"',
    '"',
    '"',
    '"',
    "-",
    "-",
    "-",
    "-",
    "-",
    "-",
    "-",
    "...",
    " ",
    " ",
    " ",
    " ",
    " ",
    "",
    "",
    "",
    "",
    "",
    "",
]

# Unicode White_Space (what the vectorized N's regex \s and strip mean); Python's str.isspace differs
# (it also counts U+001C..U+001F), so the class is spelled out.
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_RUNS = re.compile(f"[{re.escape(WHITESPACE)}]{{2,}}|[{re.escape(WHITESPACE.replace(' ', ''))}]")
_NOT_WHITE_SPACE = re.compile("[\x1c-\x1f]")
_ENTITY = re.compile("|".join(re.escape(e) for e in HTML_ENTITIES))
_ENTITY_CHAR = dict(zip(HTML_ENTITIES, HTML_CHARS))
_FOLD = str.maketrans(dict(zip(FOLD_FROM, FOLD_TO)))


def normalize_str(text: str, unescape: str = "none") -> str:
    """N on one string: unescape (html profiles), line endings, NFC, fold look-alikes, NFC, collapse whitespace,
    trim."""
    if unescape == "html":
        text = unescape_html(text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = unicodedata.normalize("NFC", text).translate(_FOLD)
    text = unicodedata.normalize("NFC", text)
    if _NOT_WHITE_SPACE.search(text) is None:  # str.split's whitespace is White_Space plus U+001C..U+001F
        return " ".join(text.split())
    return _RUNS.sub(" ", text).strip(WHITESPACE)


def unescape_html(text: str) -> str:
    """N's step 2 alone: the entities a template engine escaped, replaced in one leftmost pass."""
    return _ENTITY.sub(lambda m: _ENTITY_CHAR[m.group()], text)
