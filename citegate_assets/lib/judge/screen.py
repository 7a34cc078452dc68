"""The screen: the offline judge that fails closed. It answers only what it is near-certain of and says
`undecided` to the rest (never `partial`): with an LLM judge behind it the rest goes there, without one it is
`unjudged`, never a pass.

It reads the pair first (screen_reading.py): the passage's lines as sentences; the claim without citation
markers, reporting lead-ins ("According to the passage,") and the hedges the passage lacks, its irregular verb
forms, number words and abbreviations in the passage's form.

`yes` needs every one of these (so a wrong `yes` needs the rules and the learned score to be wrong together):
- every content word of the claim is in the passage (support found near-verbatim: an added clause whose words
  the passage lacks can never turn an answer into `yes`), all within two adjacent sentences of it (words picked
  from its different parts do not make the claim);
- every claim quantity is in the passage and in the claim's best sentence there, under the same bound ("up to
  12%" is not "12%") and next to the same words; no changed number;
- no negation in one text and not the other, or governing other words; no restricting clause, named scope or
  determiner the claim drops ("only for ...", "on the Enterprise plan", "some customers"); no contrast or
  time-shift marker ("but", "previously");
- no modal force in the passage's sentence that the claim lacks ("may happen" is not "happens"), and none in the
  claim stronger than a plain statement that the sentence lacks ("must"; the claim's own "can" or "may" only
  makes it say less); no hedge in the passage's sentence that the claim drops ("seems essential" is not
  "is essential", PASSAGE_HEDGES);
- the heuristic sees no contradiction, and the claim has content words at all;
- P(supported) of the learned model (a logistic regression and boosted trees over the features of lexical.py,
  trained on hand labels by scripts/train_screen.py) is at least the shipped threshold, chosen so that the
  cross-validated false pass rate is at most TARGET_FALSE_PASS on each tuning data set separately.

`no` only when the claim's content words are absent: fewer than `no.coverage_below` of them anywhere in the
passage, for a claim of at least `no.min_content_words` of them (a short claim can miss a word by rewording).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import resources

from .base import JudgeRequest, JudgeResult, Progress, judge_in_process
from .heuristic import PairSignals, _modals, pair_signals
from .lexical import FEATURE_NAMES, Tree, linear_log_odds, pair_facts, trees_log_odds
from .screen_reading import screen_claim, screen_passage

SCREEN_MODEL = "citegate-screen-v2"
WEIGHTS_FILE = "screen_weights.json"  # beside this module; written by scripts/train_screen.py
SCREEN_VERDICTS = ("yes", "no", "undecided")


@dataclass(frozen=True)
class HeldOutFigures:
    """The shipped screen on one held-out test split (labels used for nothing else), as (count, of) pairs: the README
    table's rows and `citegate demo` are rendered from these, and tests/test_screen.py recomputes them."""

    split: str
    pairs: int
    false_pass: tuple[int, int]  # yes on human no or partial
    false_pass_no: tuple[int, int]  # yes on human no
    recall: tuple[int, int]  # yes on human yes
    false_fail: tuple[int, int]  # no on human yes


HELD_OUT = (
    HeldOutFigures("WiCE test", 1070, (0, 740), (0, 92), (3, 330), (4, 330)),
    HeldOutFigures("AttributionBench test", 500, (5, 250), (5, 250), (33, 250), (6, 250)),
    HeldOutFigures("AttributionBench OOD test", 1686, (14, 843), (14, 843), (149, 843), (17, 843)),
)

_FEATURE = {name: i for i, name in enumerate(FEATURE_NAMES)}
# features that must be 0 for `yes`: a quantity missing from the claim's sentence, rebounded or attached to other
# words; a negation mismatch; a restricting clause, named scope or determiner the claim drops; a contrast or
# time-shift marker
YES_FORBIDS = (
    "quantity_missing_main",
    "bound_changed",
    "quantity_unanchored",
    "negation_mismatch",
    "dropped_qualifier",
    "dropped_scope",
    "dropped_restrictor",
    "contrast",
)
ALIGNED_SENTENCES = 2  # the claim's words must all be found within this many adjacent passage sentences
WEAK_MODALS = frozenset({"can", "may"})  # forces (heuristic.MODALS) that a plain statement entails
# words by which a passage reports a claim without asserting it; "appear" only before "to" ("appeared in" is a fact)
PASSAGE_HEDGES = frozenset(
    """
    seem seems seemed seemingly apparently likely unlikely possibly possible probably probable perhaps maybe
    suggest suggests suggested suggesting believed thought reportedly allegedly alleged presumably supposedly
    speculated rumored rumoured estimated argue argues argued claimed
    """.split()
)
_APPEAR = frozenset({"appear", "appears", "appeared"})


@dataclass(frozen=True)
class ScreenWeights:
    """The shipped screen: the learned model of P(supported), its threshold, and the `no` rule's settings."""

    model: str
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]  # intercept first, then one per standardised feature
    trees_base: float
    trees: tuple[Tree, ...]
    yes_threshold: float
    no_coverage_below: float
    no_min_content_words: int

    @classmethod
    def from_dict(cls, d: dict) -> ScreenWeights:
        if tuple(d["features"]) != FEATURE_NAMES:
            raise ValueError(f"{WEIGHTS_FILE}: trained on other features than FEATURE_NAMES; run make train-judge")
        return cls(
            model=d["model"],
            mean=tuple(d["mean"]),
            scale=tuple(d["scale"]),
            coef=tuple(d["yes"]["coef"]),
            trees_base=float(d["yes"]["trees_base"]),
            trees=tuple(d["yes"]["trees"]),
            yes_threshold=float(d["yes"]["threshold"]),
            no_coverage_below=float(d["no"]["coverage_below"]),
            no_min_content_words=int(d["no"]["min_content_words"]),
        )


@lru_cache(maxsize=1)
def load_screen_weights() -> ScreenWeights:
    text = resources.files(__package__).joinpath(WEIGHTS_FILE).read_text(encoding="utf-8")
    return ScreenWeights.from_dict(json.loads(text))


def yes_score(w: ScreenWeights, features: tuple[float, ...]) -> float:
    """P(supported) as log-odds: the mean of the regression's and the trees' (lexical.yes_probability's form)."""
    return (linear_log_odds(w.coef, w.mean, w.scale, features) + trees_log_odds(w.trees_base, w.trees, features)) / 2


def rules_allow_yes(features: tuple[float, ...]) -> bool:
    """The hard rules on the features alone: all claim content words present, none of YES_FORBIDS."""
    return features[_FEATURE["coverage"]] >= 1.0 and not any(features[_FEATURE[name]] for name in YES_FORBIDS)


def modal_added(sig: PairSignals) -> bool:
    """The passage's sentence has a modal force the claim lacks, or the claim one beyond WEAK_MODALS it lacks."""
    claim, sentence = _modals(sig.claim.words), _modals(sig.passage.words[sig.main])
    return bool(sentence - claim) or bool(claim - sentence - WEAK_MODALS)


def scattered(sig: PairSignals) -> bool:
    """The claim's content words are not all within ALIGNED_SENTENCES adjacent sentences of the passage: words
    gathered from its different parts do not make the claim ("a circle" in one reference, "a polygon with an
    infinite number of sides" in another)."""
    need = set(sig.claim.content)
    content = sig.passage.content
    reach = min(ALIGNED_SENTENCES, len(content))
    return not any(need <= set().union(*content[i : i + reach]) for i in range(len(content) - reach + 1))


def passage_hedged(sig: PairSignals) -> bool:
    """The passage's window hedges what the claim states plainly: a PASSAGE_HEDGES word, or "appear(s) to", that
    the claim does not have."""
    claim = set(sig.claim.words)
    words = sig.window_words
    for i, w in enumerate(words):
        if w in claim:
            continue
        if w in PASSAGE_HEDGES or (w in _APPEAR and i + 1 < len(words) and words[i + 1] == "to"):
            return True
    return False


@dataclass(frozen=True)
class ScreenRead:
    """One pair as the screen reads it: what its verdict and scripts/train_screen.py need."""

    claim: str  # as screen_reading.screen_claim gives it
    features: tuple[float, ...]  # lexical.FEATURE_NAMES
    thin: bool  # no content word: never yes, never no
    yes_allowed: bool  # the hard rules allow `yes` (the learned score decides)
    content_words: int


def read_pair(passage: str, claim: str) -> ScreenRead:
    text = screen_passage(passage)
    claim = screen_claim(text, claim)
    sig = pair_signals(text, claim)
    facts = pair_facts(text, claim, sig)
    allowed = (
        not facts.thin
        and not facts.quantity_missing
        and not facts.contradiction
        and rules_allow_yes(facts.features)
        and not scattered(sig)
        and not modal_added(sig)
        and not passage_hedged(sig)
    )
    return ScreenRead(claim, facts.features, facts.thin, allowed, len(sig.claim.content))


def says_no(read: ScreenRead, coverage_below: float, min_content_words: int) -> bool:
    """The `no` rule: a claim of at least min_content_words content words, under coverage_below of them present."""
    return (
        not read.thin
        and read.features[_FEATURE["coverage"]] < coverage_below
        and read.content_words >= min_content_words
    )


def screen_verdict(passage: str, claim: str, weights: ScreenWeights | None = None) -> str:
    """'yes' | 'no' | 'undecided' for one (passage, claim) pair, deterministically."""
    w = weights or load_screen_weights()
    read = read_pair(passage, claim)
    if read.thin:
        return "undecided"  # nothing but numbers and stopwords: not this screen's to decide
    if read.yes_allowed and yes_score(w, read.features) >= w.yes_threshold:
        return "yes"
    if says_no(read, w.no_coverage_below, w.no_min_content_words):
        return "no"
    return "undecided"


class ScreenJudge:
    """The Judge protocol over `screen_verdict`: no network, no tokens, deterministic; verdicts yes/no/undecided."""

    model = SCREEN_MODEL

    def __init__(self, weights: ScreenWeights | None = None, workers: int = 1):
        self.weights = weights or load_screen_weights()
        self.model = self.weights.model
        self.workers = workers  # processes for a large pass (lib/processes.py)

    def judge(self, requests: list[JudgeRequest], progress: Progress | None = None) -> list[JudgeResult]:
        return judge_in_process(requests, partial(screen_verdict, weights=self.weights), progress, self.workers)
