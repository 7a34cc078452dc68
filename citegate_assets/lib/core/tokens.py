"""Words of a text as the offline judges and the citation anchors compare them: lowercased, contractions expanded,
identifiers kept whole, stopwords, negation cues, unit words and comparators set apart, the rest through a light
suffix stemmer (lib/support/judge/heuristic.py describes the rules)."""

from __future__ import annotations

import re
from functools import lru_cache

STOPWORDS = frozenset(
    """
    a an the and or but nor so yet of in on at to for from by with about into onto as than then this that these
    those it its they them their theirs there here he she his her him we our us you your i me my is are was were
    be been being am do does did doing done have has had having will would shall should can could may might must
    also just very too which who whom whose what when where while how why whether both either per via upon
    again further once s t d ll re ve m o y within during through against among across around along toward
    towards each if
    """.split()
)
UNIT_WORDS = frozenset("percent usd eur gbp dollar dollars euro euros".split())  # the numeric check owns these
NEGATIONS = frozenset(
    """
    not no never none nobody nothing nowhere neither nor without cannot non except unless excluding excludes
    exclude excluded lack lacks lacking fail fails failed refuse refused deny denied
    """.split()
)
# Words that bound a quantity, by meaning: "up to 12%" is not "12%", but "above" is ">". They are not
# content words; the bound check compares them where they touch a number.
COMPARATORS = {
    ">": ("more than", "greater than", "over", "above", "exceeding", "beyond", ">"),
    "<": ("less than", "fewer than", "under", "below", "<"),
    "<=": ("up to", "at most", "no more than", "maximum", "max", "as much as", "as many as", "<=", "capped at"),
    ">=": ("at least", "no less than", "minimum", "min", "starting at", "from", ">="),
    "~": ("approximately", "about", "around", "nearly", "almost", "roughly", "some", "~"),
    "until": ("until", "till", "through"),
    "before": ("before", "prior to"),
    "after": ("after",),
}
COMPARATOR_CLASS = {phrase: cls for cls, phrases in COMPARATORS.items() for phrase in phrases}
COMPARATOR_WORDS = frozenset(
    w for phrases in COMPARATORS.values() for ph in phrases for w in ph.split() if w.isalpha()
) - {
    "than",
    "to",
    "at",
    "as",
    "no",
    "much",
    "many",
    "prior",
    "before",
    "after",
    "until",
    "till",
    "through",
    "from",
    "starting",
    "capped",
    "some",
    "more",
    "less",
    "fewer",
    "greater",
    "most",
    "least",
}
SKIP_WORDS = STOPWORDS | NEGATIONS | UNIT_WORDS | COMPARATOR_WORDS  # not content words
_CONTRACTIONS = (
    (re.compile(r"\bcan't\b|\bcannot\b"), "can not"),
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"(\w)n't\b"), r"\1 not"),
)
_WORD = re.compile(r"[a-z0-9]+(?:[-'#.][a-z0-9]+)*")
_SENTENCE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|(?<=[a-z0-9]{2}[.!?])(?=[A-Z][a-z])")
_HAS_DIGIT = re.compile(r"\d")
_HAS_ALPHA = re.compile(r"[a-z]")
_IDENT_SPLIT = re.compile(r"[-.#]")
_LETTER_DASH_DIGIT = re.compile(r"[a-z][-#]\d")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stemmer: enough to meet plurals, tenses and -ly adverbs halfway.
    charges/charged/charging -> charg; applies/apply -> appli; guaranteed/guarantees -> guarant."""
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("es") and len(w) > 4 and (w[-3] in "sxz" or w[-4:-2] in ("ch", "sh")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("eed"):
        w = w[:-1]  # agreed -> agree, exceed -> excee (then the e's go below)
    elif w.endswith("ed") and len(w) > 4:
        w = w[:-2]
    elif w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif w.endswith("ly") and len(w) > 5 and w[-3] != "p":  # monthly -> month; apply, supply stay
        w = w[:-2]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # shipped -> shipp -> ship
    if len(w.rstrip("e")) >= 3:
        w = w.rstrip("e")  # charge / charged -> charg
    if len(w) > 3 and w.endswith("y"):
        w = w[:-1] + "i"  # policy / policies -> polici
    return w


def split_words(text: str) -> list[str]:
    """Lowercased words with contractions expanded; identifiers ("nw-200", "spring25") kept whole."""
    t = text.lower()
    if "'" in t or "cannot" in t:
        for pattern, repl in _CONTRACTIONS:
            t = pattern.sub(repl, t)
    out: list[str] = []
    for tok in _WORD.findall(t):
        if tok.isalpha():
            out.append(tok)
            continue
        if tok.endswith("'s"):
            tok = tok[:-2]
        tok = tok.replace("'", "").strip(".")
        if not tok:
            continue
        if _HAS_DIGIT.search(tok) and _HAS_ALPHA.search(tok):
            parts = [p for p in _IDENT_SPLIT.split(tok) if p]
            if any(_HAS_ALPHA.search(p) and _HAS_DIGIT.search(p) for p in parts) or _LETTER_DASH_DIGIT.search(tok):
                out.append(tok)  # an identifier: nw-200, aes-256, spring25, kb-0042#c3
            else:
                out.extend(parts)  # "24-month" -> "24", "month"
            continue
        out.extend(p for p in tok.split("-") if p)
    return out


def stemmed_content(words: list[str]) -> list[str]:
    """Stemmed content words in order: no stopwords, negation cues, unit words or bare numbers."""
    out = []
    for w in words:
        if w in SKIP_WORDS or w.replace(".", "").isdigit():
            continue
        out.append(stem(w))
    return out


def split_sentences(text: str) -> list[str]:
    parts = [s for s in _SENTENCE.split(text) if s and s.strip()]
    return parts or [text]


def content_words(text: str) -> list[str]:
    """The stemmed content words of a text, in order, as both offline judges compare them."""
    return stemmed_content(split_words(text))


def anchor_terms(text: str) -> set[str]:
    """What a claim and a sentence share when provenance anchors a span-less citation (lib/ingest/anchors.py): the
    stemmed
    content words and, unlike the judges' content words, the numbers too (a shared figure is strong evidence)."""
    return {w if w.replace(".", "").isdigit() else stem(w) for w in split_words(text) if w not in SKIP_WORDS}
