"""The offline judge: a deterministic, conservative stand-in for an LLM entailment judge.

It answers the seed's question ("does this PASSAGE alone entail this CLAIM?") from surface signals
only, so it is built to be wrong in the safe direction. The product's first promise is never to
report a false pass: a lost "yes" (recall) is cheap, a wrong "yes" (false pass) is expensive. So
"yes" needs every check below to pass, and any doubt gives "partial".

Words. Both texts are lowercased, contractions expanded ("doesn't" -> "does not") and reduced to
content words: stopwords, negation cues, unit words ("percent", "dollars"), comparators ("over",
"up to") and bare numbers are dropped (the numeric check owns numbers); the rest goes through a light
suffix stemmer ("charged", "charges" -> "charg"). Identifiers that glue letters to digits ("NW-200",
"AES-256", "SPRING25") stay whole, so "NW-300" does not match "NW-200". A lead-in such as
"In short:" is stripped from the claim.

Window. The passage is split into sentences. The main sentence is the one holding most of the
claim's content words and quantities; the sentence before it may join the window when it supplies
at most PRE_CONTEXT_WORDS missing words (an antecedent: "The add-on includes ..." after "The
Priority Support add-on costs ..."). Words scattered over unrelated sentences never add up to "yes".

"yes" only when all of these hold:
- coverage: every claim content word is in the window, and the claim has at least MIN_CONTENT;
- numbers: every claim quantity (numbers.py: same value, same unit) is in the passage and in the main
  sentence, next to one of the same words ("10% on renewals" is not "10% on first-year"), under the
  same bound ("up to 12%" is not "12%", "above" equals ">");
- negation: both texts have a negation cue (not, no, never, none, without, except, unless, cannot,
  n't, non-, ...) or neither, and the cues govern the same shared words;
- locality: the claim's words hang together in one stretch of the main sentence (few breaks of more
  than PAIR_DISTANCE words), not picked from its different clauses;
- qualifiers: no restricting clause in the window that the claim drops ("only for orders over 500
  units", "except in the EU region", "who pay annually", "after a 10-day grace period"), no named
  scope it drops ("on the Enterprise plan"), no restricting determiner ("some", "selected"), no
  contrast, time-shift or non-fact marker ("but", "whereas", "previously", "proposed"), and the same
  modal force ("may happen" is not "happens").

"no" when under NO_COVERAGE of the claim's content words are anywhere in the passage (unrelated),
or when the main sentence covers at least CONTRADICTION_COVERAGE of them but flips the negation or
states another value in a unit the claim uses (a changed number). Everything else is "partial".

It cannot see synonyms ("twice" for "2 times", "free of charge" for "no charge"), so faithful
paraphrases come out "partial" (or "no"): that is the recall it gives up for a low false pass rate.
Measured figures are in tests/test_heuristic_judge.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from citegate_assets.lib.core.tokens import (
    COMPARATOR_CLASS,
    NEGATIONS,
    SKIP_WORDS,
    split_sentences,
    split_words,
    stem,
    stemmed_content,
)
from citegate_assets.lib.support.judge.base import JudgeRequest, JudgeResult, Progress, judge_in_process
from citegate_assets.lib.support.numbers import Quantity, extract_quantities

HEURISTIC_MODEL = "citegate-heuristic-v1"

# Tunables, chosen on labels/demo-labels.jsonl and the WiCE dev split (see the tests).
YES_COVERAGE = 1.0  # share of the claim's content words the window must contain for "yes"
MIN_CONTENT = 3  # claims with fewer content words are too thin for "yes"
PRE_CONTEXT_WORDS = 2  # words the sentence before the main one may contribute (an antecedent)
PAIR_DISTANCE = 4  # words adjacent in the claim must sit this close in the main sentence...
LINKS_PER_BREAK = 4  # ...with one exception allowed per this many links (reordered clauses)
NO_COVERAGE = 0.35  # below this share of the claim's content words anywhere in the passage: "no"
CONTRADICTION_COVERAGE = 0.75  # a negation flip or a changed number above this coverage: "no"

# Words that open a restricting clause: "only for orders over 500 units", "except in the EU region".
# Restrictive relative clauses and adjuncts count too: "Customers who pay annually ...", "... for
# approved requests", "... after a 10-day grace period".
QUALIFIER_CUES = (
    "only",
    "except",
    "unless",
    "provided",
    "providing",
    "if",
    "excluding",
    "subject to",
    "until",
    "as long as",
    "so long as",
    "on condition",
    "who",
    "whose",
    "that",
    "for",
    "when",
    "whenever",
    "where",
    "with",
    "after",
    "before",
    "during",
    "while",
    "once",
    "in case",
)


# Modal verbs by force: "may happen" does not entail "happens", nor "can" "must". ("will" is left out:
# policy text uses it as a plain present, "refunds will be processed within 5 days".)
MODALS = {
    "can": "can",
    "could": "can",
    "may": "may",
    "might": "may",
    "must": "must",
    "shall": "must",
    "should": "should",
}
# Determiners that restrict a statement to part of its subject: "Some Enterprise customers ...".
RESTRICTORS = frozenset(
    "some certain selected select most many several few eligible qualifying qualified specific particular limited "
    "partially partly".split()
)
# Words that set a sentence against itself or against the present, or report a non-fact: with any of
# them in the window but not in the claim, the claim's words may come from the wrong side ("but",
# "whereas", "unlike"), the wrong time ("previously", "now") or a proposal that never happened.
CONTRASTS = frozenset(
    "but whereas unlike instead however although though rather previously formerly former old now longer "
    "replaced replace replaces superseded proposed proposal propose rejected considered considering expected "
    "planned rumored rumoured hypothetical draft".split()
)
NEGATION_SCOPE = 3  # content words after a negation cue that it negates
ANCHOR_CLAIM = 1  # content words on each side of a claim quantity that name what it counts...
ANCHOR_PASSAGE = 2  # ...at least one of which must sit this close to the same quantity in the passage

_CLAUSE_END = re.compile(r"[,;:.!?()]|\s-\s")
_QUALIFIER = re.compile(r"\b(" + "|".join(re.escape(q) for q in QUALIFIER_CUES) + r")\b")
_COMPARATOR = re.compile(
    r"(?:^|(?<=\W))(" + "|".join(re.escape(c) for c in sorted(COMPARATOR_CLASS, key=len, reverse=True)) + r")\s*$"
)
# Discourse markers an answer puts before a claim; they are not part of what the claim asserts.
_LEAD_IN = re.compile(
    r"^\s*(?:(?:in short|in summary|in brief|to summarize|to summarise|to sum up|overall|in other words|"
    r"put simply|simply put|basically|essentially|note|in fact|indeed)\s*[:,]|(?:yes|no)\s*,)\s*",
    re.IGNORECASE,
)


class Passage:
    """A passage split once into sentences, with each sentence's words and content words."""

    __slots__ = (
        "sentences",
        "words",
        "seqs",
        "content",
        "all_content",
        "negated",
        "quantities",
        "all_quantities",
        "quantity_keys",
    )

    def __init__(self, text: str):
        self.sentences = split_sentences(text)
        self.words = [split_words(s) for s in self.sentences]
        self.seqs = [stemmed_content(ws) for ws in self.words]
        self.content = [set(seq) for seq in self.seqs]
        self.all_content = set().union(*self.content) if self.content else set()
        self.negated = [any(w in NEGATIONS for w in ws) for ws in self.words]
        self.quantities = [extract_quantities(s) for s in self.sentences]
        self.all_quantities = extract_quantities(text)
        # per sentence, what _present looks up: its quantities' values, and their (value, unit) pairs
        self.quantity_keys = [({h.value for h in qs}, {(h.value, h.unit) for h in qs}) for qs in self.quantities]


@lru_cache(maxsize=4096)
def read_passage(text: str) -> Passage:
    """A passage read once: both offline judges read each of its sentences this way (cached)."""
    return Passage(text)


def _window(p: Passage, claim: set[str], quantities: list[Quantity]) -> tuple[int, int, float]:
    """(start, end, coverage) of the claim's best window: the main sentence (most claim words and
    claim quantities; then most quantities; then earliest), extended by the sentence before it when
    that one supplies at most PRE_CONTEXT_WORDS missing words, as an antecedent does ("The add-on
    includes ..." after "The Priority Support add-on costs ...")."""
    n = len(p.sentences)
    best_key, main = None, 0
    for i in range(n):
        values, pairs = p.quantity_keys[i]  # _present(q, p.quantities[i]), as set look-ups
        nums = sum(1 for q in quantities if (q.value in values if q.unit is None else (q.value, q.unit) in pairs))
        key = (len(claim & p.content[i]) + nums, nums, -i)
        if best_key is None or key > best_key:
            best_key, main = key, i
    start, covered = main, len(claim & p.content[main])
    if main > 0 and covered < len(claim):
        extra = len((claim - p.content[main]) & p.content[main - 1])
        if 0 < extra <= PRE_CONTEXT_WORDS:
            start, covered = main - 1, covered + extra
    return start, main + 1, covered / len(claim) if claim else 0.0


def _present(q: Quantity, have: list[Quantity]) -> bool:
    return any(h.value == q.value and (q.unit is None or h.unit == q.unit) for h in have)


def _chain_breaks(claim_seq: list[str], main_seq: list[str]) -> tuple[int, int]:
    """(breaks, links): walk the claim's words (those the main sentence has) through the sentence,
    choosing one position per word so that as many consecutive words as possible land within
    PAIR_DISTANCE of each other; a break is a step that cannot. The matched words must hang together
    in one stretch of the sentence, not be picked from its different clauses."""
    where: dict[str, list[int]] = {}
    for i, w in enumerate(main_seq):
        where.setdefault(w, []).append(i)
    seq = [w for w in claim_seq if w in where]
    seq = [w for i, w in enumerate(seq) if i == 0 or w != seq[i - 1]]
    if len(seq) < 2:
        return 0, 0
    best = {pos: 0 for pos in where[seq[0]]}
    for w in seq[1:]:
        best = {pos: min(b + (abs(pos - prev) > PAIR_DISTANCE) for prev, b in best.items()) for pos in where[w]}
    return min(best.values()), len(seq) - 1


_SCOPE = re.compile(r"\b(?:in|on|for|to|at|from|by)\s+(?:the\s+|all\s+|its\s+)?((?:[A-Z][\w'-]*\s?)+)")


def _dropped_scope(main_text: str, claim_content: set[str]) -> bool:
    """A named scope in the main sentence ("on the Enterprise plan", "in the EU region", "for Gold
    partners") that the claim leaves out: the claim generalises what the passage restricts."""
    for m in _SCOPE.finditer(main_text):
        names = [w for w in stemmed_content(split_words(m.group(1)))]
        if names and not any(w in claim_content for w in names):
            return True
    return False


@lru_cache(maxsize=8192)
def _anchored_seq(text: str) -> tuple[str | Quantity, ...]:
    """Content words in order with each quantity in its place: "Partners earn 20% on renewals" ->
    ['partner', 'earn', Quantity(20, %), 'renewal']."""
    out: list[str | Quantity] = []
    pos = 0
    spans: list[tuple[int, int, list[Quantity]]] = []
    for q in extract_quantities(text):
        if spans and spans[-1][2][-1].text == q.text and text.find(q.text, spans[-1][0]) == spans[-1][0]:
            spans[-1][2].append(q)  # the second end of a range shares the range's span
            continue
        at = text.find(q.text, pos)
        if at < 0:
            continue
        spans.append((at, at + len(q.text), [q]))
        pos = at + len(q.text)
    pos = 0
    for start, stop, qs in spans:
        out.extend(stemmed_content(split_words(text[pos:start])))
        out.extend(qs)
        pos = stop
    out.extend(stemmed_content(split_words(text[pos:])))
    return tuple(out)


def _neighbours(seq: tuple[str | Quantity, ...], i: int, reach: int) -> set[str]:
    found: set[str] = set()
    for step in (-1, 1):
        j, taken = i + step, 0
        while 0 <= j < len(seq) and taken < reach:
            item = seq[j]
            if isinstance(item, str):
                found.add(item)
                taken += 1
            j += step
    return found


def _unanchored_quantity(claim: str, sentence: str) -> bool:
    """A claim quantity attached to other words than in the sentence: "10% on first-year" cited from
    "20% on first-year ... 10% on renewals". Each claim quantity needs one of its neighbouring words
    (those the sentence has at all) next to the same quantity in the sentence."""
    claim_seq = _anchored_seq(claim)
    sentence_seq = _anchored_seq(sentence)
    sentence_words = {w for w in sentence_seq if isinstance(w, str)}
    for i, q in enumerate(claim_seq):
        if not isinstance(q, Quantity):
            continue
        near = _neighbours(claim_seq, i, ANCHOR_CLAIM) & sentence_words  # words from an antecedent don't count
        if not near:
            continue
        spots = [j for j, w in enumerate(sentence_seq) if isinstance(w, Quantity) and _present(q, [w])]
        if not any(near & _neighbours(sentence_seq, j, ANCHOR_PASSAGE) for j in spots):
            return True
    return False


def _negated(words: list[str]) -> set[str]:
    """Stems of the content words within NEGATION_SCOPE after a negation cue: "not issued as credit"
    -> {issu, credit}; "non-refundable" -> {refundabl}."""
    out: set[str] = set()
    left = 0
    for w in words:
        if w in NEGATIONS:
            left = NEGATION_SCOPE
        elif left and w not in SKIP_WORDS and not w.replace(".", "").isdigit():
            out.add(stem(w))
            left -= 1
    return out


def _negation_mismatch(claim_words: list[str], window_words: list[str]) -> bool:
    """A negation in one text but not the other, or one that governs different shared words:
    "setup fees are not refundable" against "refunds are not issued ..., setup fees are refundable"."""
    claim_has = any(w in NEGATIONS for w in claim_words)
    window_has = any(w in NEGATIONS for w in window_words)
    if claim_has != window_has:
        return True
    shared = set(stemmed_content(claim_words)) & set(stemmed_content(window_words))
    return (_negated(claim_words) & shared) != (_negated(window_words) & shared)


def _contrast(window_words: list[list[str]], claim_words: list[str]) -> bool:
    have = {stem(w) for ws in window_words for w in ws if w in CONTRASTS}
    return bool(have - {stem(w) for w in claim_words})


def _modals(words: list[str]) -> set[str]:
    return {MODALS[w] for w in words if w in MODALS}


def _dropped_restrictor(window_words: list[str], claim_words: list[str]) -> bool:
    """The window restricts its subject ("Some customers", "Selected partners") and the claim doesn't."""
    return bool((RESTRICTORS & set(window_words)) - set(claim_words))


def _dropped_qualifier(text: str, claim_content: set[str]) -> bool:
    """A restricting clause in the window ("only for orders over 500 units", "who pay annually") that
    the claim leaves out: the clause's first content word, or most of its first words, are not in the
    claim. The claim then generalises what the passage restricts."""
    t = text.lower()
    for m in _QUALIFIER.finditer(t):
        rest = t[m.end() :]
        end = _CLAUSE_END.search(rest)
        words = stemmed_content(split_words(rest[: end.start()] if end else rest))[:8]
        if words and (words[0] not in claim_content or sum(w in claim_content for w in words) / len(words) < 0.5):
            return True
    return False


def _comparator_before(text: str, start: int) -> str | None:
    m = _COMPARATOR.search(text[max(0, start - 24) : start].lower())
    return COMPARATOR_CLASS[m.group(1)] if m else None


def _bound_changed(
    claim: str, window_text: str, claim_quantities: list[Quantity], window_quantities: list[Quantity]
) -> bool:
    """A claim quantity the window bounds differently: "up to 12%" cited for "12%", "over 500" for "500".
    The quantities are extract_quantities of each text, read once by the callers."""
    window_q = [(q, window_text.find(q.text)) for q in window_quantities]
    for q in claim_quantities:
        claim_cmp = _comparator_before(claim, claim.find(q.text))
        for w, pos in window_q:
            if w.value == q.value and (q.unit is None or w.unit == q.unit):
                if pos >= 0 and _comparator_before(window_text, pos) != claim_cmp:
                    return True
    return False


def _changed_number(claim_quantities: list[Quantity], sentence_quantities: list[Quantity]) -> bool:
    """The sentence states, in a unit the claim uses, a value the claim does not: a substitution."""
    claim_values = {(q.value, q.unit) for q in claim_quantities}
    claim_units = {q.unit for q in claim_quantities}
    return any((w.value, w.unit) not in claim_values and w.unit in claim_units for w in sentence_quantities)


@dataclass(frozen=True)
class ClaimParts:
    """A claim as both offline judges read it: its text without a lead-in, words, content words, quantities."""

    text: str
    words: list[str]
    seq: list[str]  # content words in order
    content: frozenset[str]
    quantities: list[Quantity]


@lru_cache(maxsize=4096)
def claim_parts(claim: str) -> ClaimParts:
    """A claim is judged against several passages (best evidence's candidates): read once, never changed after."""
    text = _LEAD_IN.sub("", claim, count=1)
    words = split_words(text)
    seq = stemmed_content(words)
    return ClaimParts(text, words, seq, frozenset(seq), extract_quantities(text))


class PairSignals:
    """One (passage, claim) pair as both offline judges read it: the claim's best window in the passage and what
    each of the heuristic's checks finds there. A check runs when first read (the heuristic stops at the first
    failed one), then keeps its answer; `verdict` is the heuristic's answer from these signals."""

    def __init__(self, passage: str, claim: str):
        self.passage = p = read_passage(passage)
        self.claim = parts = claim_parts(claim)
        content = set(parts.content)
        self.missing_quantities = [q for q in parts.quantities if not _present(q, p.all_quantities)]
        self.overall = len(content & p.all_content) / len(content) if content else 0.0  # share found anywhere

    @cached_property
    def window(self) -> tuple[int, int, float]:
        """(start, end, coverage) of the claim's best window (`_window`)."""
        return _window(self.passage, set(self.claim.content), self.claim.quantities)

    @property
    def start(self) -> int:
        """The window is the sentences start..main."""
        return self.window[0]

    @property
    def main(self) -> int:
        return self.window[1] - 1

    @property
    def coverage(self) -> float:
        """The share of the claim's content words in the window."""
        return self.window[2]

    @cached_property
    def main_text(self) -> str:
        return self.passage.sentences[self.main]

    @cached_property
    def window_text(self) -> str:
        return " ".join(self.passage.sentences[self.start : self.main + 1])

    @cached_property
    def window_words(self) -> list[str]:
        return [w for ws in self.passage.words[self.start : self.main + 1] for w in ws]

    @cached_property
    def missing_here(self) -> list[Quantity]:
        """Claim quantities not in the main sentence."""
        return [q for q in self.claim.quantities if not _present(q, self.passage.quantities[self.main])]

    @cached_property
    def claim_negated(self) -> bool:
        return any(w in NEGATIONS for w in self.claim.words)

    @cached_property
    def changed_number(self) -> bool:
        return _changed_number(self.claim.quantities, self.passage.quantities[self.main])

    @cached_property
    def negation_mismatch(self) -> bool:
        return _negation_mismatch(self.claim.words, self.window_words)

    @cached_property
    def chain(self) -> tuple[int, int]:
        """(breaks, links) of the claim's words through the main sentence."""
        return _chain_breaks(self.claim.seq, self.passage.seqs[self.main])

    @cached_property
    def contrast(self) -> bool:
        return _contrast(self.passage.words[self.start : self.main + 1], self.claim.words)

    @cached_property
    def dropped_qualifier(self) -> bool:
        return _dropped_qualifier(self.window_text, set(self.claim.content))

    @cached_property
    def dropped_scope(self) -> bool:
        return _dropped_scope(self.main_text, set(self.claim.content))

    @cached_property
    def bound_changed(self) -> bool:
        return _bound_changed(
            self.claim.text, self.main_text, self.claim.quantities, self.passage.quantities[self.main]
        )

    @cached_property
    def modal_mismatch(self) -> bool:
        return _modals(self.claim.words) != _modals(self.passage.words[self.main])

    @cached_property
    def dropped_restrictor(self) -> bool:
        return _dropped_restrictor(self.window_words, self.claim.words)

    @cached_property
    def unanchored_quantity(self) -> bool:
        # a claim without quantities has none to anchor (the quantities are those of claim.text)
        return bool(self.claim.quantities) and _unanchored_quantity(self.claim.text, self.main_text)

    @cached_property
    def verdict(self) -> str:
        return _verdict(self)


def pair_signals(passage: str, claim: str) -> PairSignals:
    """Read one pair once: the shared preparation of the heuristic and the learned judge (lexical.py)."""
    return PairSignals(passage, claim)


def _verdict(s: PairSignals) -> str:
    p, parts = s.passage, s.claim
    if not parts.content:  # nothing but numbers and stopwords: too thin to judge, never "yes"
        return "partial" if parts.quantities and not s.missing_quantities else "no"
    if s.overall < NO_COVERAGE:
        return "no"
    # Contradiction: the sentence that matches the claim best says the opposite or another number.
    if s.coverage >= CONTRADICTION_COVERAGE and (
        s.claim_negated != p.negated[s.main] or (s.missing_here and s.changed_number)
    ):
        return "no"
    if (
        s.coverage >= YES_COVERAGE
        and len(parts.content) >= MIN_CONTENT
        and not s.missing_quantities
        and not s.missing_here
        and not s.negation_mismatch
        and s.chain[0] <= s.chain[1] // LINKS_PER_BREAK
        and not s.contrast
        and not s.dropped_qualifier
        and not s.dropped_scope
        and not s.bound_changed
        and not s.modal_mismatch
        and not s.dropped_restrictor
        and not s.unanchored_quantity
    ):
        return "yes"
    return "partial"


def heuristic_verdict(passage: str, claim: str) -> str:
    """'yes' | 'partial' | 'no' for one (passage, claim) pair, deterministically and conservatively."""
    return pair_signals(passage, claim).verdict


class HeuristicJudge:
    """The Judge protocol over `heuristic_verdict`: no network, no tokens, deterministic."""

    model = HEURISTIC_MODEL

    def __init__(self, workers: int = 1):
        self.workers = workers  # processes for a large pass (lib/core/processes.py)

    def judge(self, requests: list[JudgeRequest], progress: Progress | None = None) -> list[JudgeResult]:
        return judge_in_process(requests, heuristic_verdict, progress, self.workers)
