"""How the screen reads a (passage, claim) pair before its rules apply.

The passage: curly apostrophes made straight, and each line its own sentence (cited references are lists, tables
and titles whose lines end without a full stop; read as one run-on sentence, a list's items would lend each other
words, negations and qualifiers).

The claim, read against that passage:
- cut: citation markers ("[1]", "[2, 3]"); a lead-in that ties it to the rest of the answer or to its source
  ("However,", "Additionally,", "According to the passage,", "Studies have shown that", "It is worth noting that");
  and, where the passage lacks them, HEDGES (words that make the claim say less: "often", "likely", "certain",
  "including"), a WRAPPERS noun before "of" ("a type of socket" is a socket) and "such" of "such as";
- put in the passage's form where it says the same in another one: an irregular verb form ("sang" for "sings",
  IRREGULAR_FORMS), a number word for the passage's digits ("three" for "3"), a month's abbreviation, and a few
  country abbreviations ("U.S." for "United States").

So a `yes` still needs every word the claim asserts: a word is cut only when the claim says no less without it
(support of the claim without a hedge is support of the hedged claim), and replaced only by the same word or
number in another form. Any other word the passage lacks stays in the claim and keeps it from `yes`, so an
unsupported clause never turns an answer into `yes`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .heuristic import _stem, content_words, read_passage

_MARKER = re.compile(r"\s*\[\d+(?:\s*[,;–-]\s*\d+)*\]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_BULLET = re.compile(r"^\s*(?:[-•*·▪–]+|\d{1,2}[.)])\s+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,;:.!?])")
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-'#.][A-Za-z0-9]+)*")

# words that make a claim say less ("X often causes Y" is weaker than "X causes Y") or point to the rest of the
# answer ("other factors"); never a negation, a quantity, a universal ("all", "every") or an intensifier ("very")
HEDGES = frozenset(
    """
    often typically generally usually commonly sometimes frequently likely potentially possibly probably perhaps
    arguably largely mostly mainly primarily partly relatively somewhat various certain specific particular
    additional other another respective including
    """.split()
)
WRAPPERS = frozenset("type types kind kinds sort sorts form forms variety aspect aspects example examples".split())

_CONNECTIVE = (
    r"additionally|also|furthermore|moreover|however|overall|notably|importantly|indeed|therefore|thus|hence|"
    r"consequently|nevertheless|nonetheless|meanwhile|finally|lastly|ultimately|essentially|basically|similarly|"
    r"likewise|specifically|interestingly|in addition|in fact|in particular|in general|in summary|in conclusion|"
    r"in short|for example|for instance|as a result|on the other hand|first|firstly|second|secondly|third|thirdly"
)
_SOURCE = (
    r"(?:passage|document|source|article|text|study|studies|research|report|author|reference|website|web page|"
    r"page|evidence|data|survey|paper|analysis|literature|context)s?(?:\s*(?:id\s*)?\[?\d+\]?)?"
)
_REPORTS = (
    r"(?:states?|stated|says|said|mentions?|mentioned|notes?|noted|reports?|reported|explains?|explained|"
    r"describes?|described|indicates?|indicated|shows?|showed|shown|suggests?|suggested|finds|found|confirms?|"
    r"confirmed|highlights?|highlighted|emphasi[sz]es|emphasi[sz]ed|points? out|pointed out|demonstrates?|"
    r"demonstrated|reveals?|revealed)"
)
LEAD_INS = (
    re.compile(rf"^\s*(?:{_CONNECTIVE})\s*,\s*", re.IGNORECASE),
    re.compile(rf"^\s*according to (?:the |this |these |a |an )?{_SOURCE}\s*,\s*", re.IGNORECASE),
    re.compile(
        rf"^\s*(?:the |this |these |a |an |one |several |many |some |recent )?{_SOURCE}\s+"
        rf"(?:(?:also|further|clearly|explicitly)\s+)?(?:has |have |had )?(?:been )?{_REPORTS}\s+that\s+",
        re.IGNORECASE,
    ),
    re.compile(
        r"^\s*(?:it is|it's|it has been)\s+(?:also\s+)?(?:worth noting|important to note|notable|noteworthy|noted|"
        r"reported|known|stated|shown|documented)\s+that\s+",
        re.IGNORECASE,
    ),
    re.compile(r"^\s*(?:note|notably|importantly)\s+that\s+", re.IGNORECASE),
)

_IRREGULAR_TABLE = """
arise arose arisen; awake awoke awoken; be was were been; beat beaten; become became; begin began begun;
bend bent; bite bit bitten; bleed bled; blow blew blown; break broke broken; breed bred; bring brought;
build built; burn burnt; buy bought; catch caught; choose chose chosen; come came; creep crept; deal dealt; dig dug;
do did done; draw drew drawn; dream dreamt; drink drank drunk; drive drove driven; eat ate eaten; feed fed; feel felt;
fight fought; flee fled; fly flew flown; forbid forbade forbidden; forget forgot forgotten; forgive forgave forgiven;
freeze froze frozen; get got gotten; give gave given; go went gone; grow grew grown; hang hung; have had; hear heard;
hide hid hidden; hold held; keep kept; kneel knelt; know knew known; lead led; leap leapt; learn learnt; lend lent;
lose lost; make made; mean meant; meet met; pay paid; prove proven; ride rode ridden; ring rang rung; rise risen;
say said; see seen; seek sought; sell sold; send sent; shake shook shaken; shine shone; shoot shot; show shown;
shrink shrank shrunk; sing sang sung; sink sank sunk; sit sat; sleep slept; slide slid; speak spoke spoken;
speed sped; spend spent; spin spun; spring sprang sprung; stand stood; steal stole stolen; stick stuck; sting stung;
strike struck stricken; strive strove striven; swear swore sworn; sweep swept; swim swam swum; swing swung;
take took taken; teach taught; tear tore torn; tell told; think thought; throw threw thrown; understand understood;
undertake undertook undertaken; wake woke woken; wear wore worn; weave wove woven; weep wept; win won;
withdraw withdrew withdrawn; write wrote written; overcome overcame; undergo underwent undergone; withstand withstood;
oversee oversaw overseen; overtake overtook overtaken; mislead misled; foresee foresaw foreseen; uphold upheld;
rebuild rebuilt; rewrite rewrote rewritten
"""
# left out: forms that are other words too ("found", "left", "saw", "rose", "fell", "born", "bore", "lay", "ground",
# "bound", "wound"); a capitalised claim word is never rewritten ("Fed", "Met" may be names)
IRREGULAR_FORMS = {
    form: forms[0]
    for entry in _IRREGULAR_TABLE.split(";")
    for forms in [entry.split()]
    for form in forms[1:]
    if form != forms[0]
}
MONTHS = {
    "jan": "january",
    "feb": "february",
    "mar": "march",
    "apr": "april",
    "jun": "june",
    "jul": "july",
    "aug": "august",
    "sep": "september",
    "sept": "september",
    "oct": "october",
    "nov": "november",
    "dec": "december",
}
_MONTH_WORDS = frozenset(MONTHS) | frozenset(MONTHS.values())
NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
} | {"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80", "ninety": "90"}
# a name and its abbreviations, as written (the abbreviations case-sensitive: "US" is not "us")
ABBREVIATIONS = (
    ("United States", ("U.S.", "U.S.A.", "USA", "US")),
    ("United Kingdom", ("U.K.", "UK")),
    ("European Union", ("EU",)),
    ("United Nations", ("U.N.", "UN")),
)


def same_word_key(word: str) -> str:
    """Two words with the same key are forms of one word: the stem of the base form ("sang" and "sings" -> "sing",
    "Jan" and "January" -> "januari")."""
    w = word.lower()
    w = IRREGULAR_FORMS.get(w, MONTHS.get(w, w))
    return _stem(w) if w.isalpha() else w


@lru_cache(maxsize=4096)
def screen_passage(passage: str) -> str:
    """The passage as the screen reads it: straight apostrophes, and each non-empty line a sentence (a bullet cut,
    a full stop added where the line has none, its first letter raised so that the sentence splitter sees it)."""
    text = passage.translate(_APOSTROPHES)
    if "\n" not in text:
        return text
    lines = []
    for raw in text.split("\n"):
        line = _BULLET.sub("", raw).strip()
        if not line:
            continue
        if line[-1] not in ".!?":
            line += "."
        lines.append(line[0].upper() + line[1:])
    return " ".join(lines)


@lru_cache(maxsize=4096)
def _passage_forms(passage: str) -> tuple[dict[str, str], frozenset[str]]:
    """Of a passage as screen_passage gives it: the same_word_key of each irregular form or month abbreviation in it
    -> that word, and the values of its quantities."""
    p = read_passage(passage)
    forms = {same_word_key(w): w for words in p.words for w in words if w in IRREGULAR_FORMS or w in MONTHS}
    return forms, frozenset(q.value for qs in p.quantities for q in qs)


def _passage_form(word: str, have: frozenset[str] | set[str], forms: dict[str, str]) -> str | None:
    """The word as the passage writes it when the passage has it in another form: the base form when the passage
    has a regular form of it ("sang" -> "sing" for "sings"), or the passage's own irregular form or abbreviation."""
    key = same_word_key(word)
    if key in have:
        return IRREGULAR_FORMS.get(word, MONTHS.get(word, word))
    return forms.get(key)


def _phrase(form: str, case_sensitive: bool) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(form)}(?!\w)", 0 if case_sensitive else re.IGNORECASE)


# each name's forms, the name first: (pattern, as written)
_ABBREVIATION_FORMS = tuple(
    tuple([(_phrase(name, False), name)] + [(_phrase(s, True), s) for s in short]) for name, short in ABBREVIATIONS
)


def _abbreviations_as_in(passage: str, claim: str) -> str:
    """A name the claim writes one way and the passage only the other ("U.S." / "United States"), as the passage
    writes it."""
    for forms in _ABBREVIATION_FORMS:
        in_claim = [(pattern, form) for pattern, form in forms if pattern.search(claim)]
        if not in_claim:
            continue
        in_passage = [form for pattern, form in forms if pattern.search(passage)]
        for pattern, form in in_claim:
            if in_passage and form not in in_passage:
                claim = pattern.sub(in_passage[0], claim)
    return claim


def strip_lead_in(claim: str) -> str:
    """The claim without the lead-ins that tie it to the answer around it or to its source, its first letter raised."""
    before = None
    while before != claim:
        before = claim
        for pattern in LEAD_INS:
            claim = pattern.sub("", claim, count=1)
    return claim[:1].upper() + claim[1:]


def screen_claim(passage: str, claim: str) -> str:
    """The claim as the screen reads it against a passage (given as screen_passage returns it); see the module."""
    text = _MARKER.sub("", claim.translate(_APOSTROPHES)).strip()
    text = strip_lead_in(text)
    forms, values = _passage_forms(passage)
    have = read_passage(passage).all_content
    text = _abbreviations_as_in(passage, text)
    tokens = list(_TOKEN.finditer(text))
    out: list[str] = []
    at = 0
    skip_next = False
    for i, m in enumerate(tokens):
        token, low = m.group(0), m.group(0).lower()
        out.append(text[at : m.start()])
        at = m.end()
        if skip_next:  # the "of" after a wrapper noun that was cut
            skip_next = False
            continue
        stems = content_words(token)
        if not stems or all(s in have for s in stems):
            out.append(token)
            continue
        after = tokens[i + 1].group(0).lower() if i + 1 < len(tokens) else ""
        if low in HEDGES or (low == "such" and after == "as"):
            continue
        if low in WRAPPERS and after == "of":
            skip_next = True
            continue
        if low in NUMBER_WORDS and NUMBER_WORDS[low] in values:
            out.append(NUMBER_WORDS[low])
        elif token == low or low in _MONTH_WORDS:
            form = _passage_form(low, have, forms) or token
            out.append(form[:1].upper() + form[1:] if token[:1].isupper() else form)
            if low in MONTHS and text[at : at + 1] == ".":
                at += 1  # the abbreviation's full stop, which would end a sentence before "2001"
        else:
            out.append(token)
    out.append(text[at:])
    read = _SPACE_BEFORE_PUNCTUATION.sub(r"\1", re.sub(r"\s{2,}", " ", "".join(out))).strip().lstrip(",;: ")
    return read[:1].upper() + read[1:]
