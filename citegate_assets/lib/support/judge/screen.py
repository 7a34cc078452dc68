"""The screen: the offline judge that fails closed. It answers only what it is near-certain of and says
`undecided` to the rest (never `partial`): with an LLM judge behind it the rest goes there, without one it is
`unjudged`, never a pass.

`yes` needs every one of these (so a wrong `yes` needs the rules and the learned score to be wrong together):
- every content word of the claim is in the passage (support found near-verbatim: an added clause whose words
  the passage lacks can never turn an answer into `yes`);
- every claim quantity is in the passage and in the claim's best sentence there, under the same bound ("up to
  12%" is not "12%") and next to the same words; no changed number;
- no negation in one text and not the other, or governing other words; no restricting clause, named scope or
  determiner the claim drops ("only for ...", "on the Enterprise plan", "some customers"); no contrast or
  time-shift marker ("but", "previously"); the same modal force ("may" is not "must");
- the heuristic sees no contradiction, and the claim has content words at all;
- P(supported) of the learned model (a logistic regression and boosted trees over the features of lexical.py,
  trained on hand labels by scripts/train_screen.py) is at least the shipped threshold, chosen so that the
  cross-validated false pass rate is at most TARGET_FALSE_PASS on each tuning data set separately.

`no` only when the claim's content words are absent: fewer than `no.coverage_below` of them anywhere in the
passage, for a claim of at least `no.min_content_words` of them (a short claim can miss a word by rewording).

Citation markers ("[1]", "[2, 3]") are cut from the claim first: they are not what it asserts.

Tried for more recall and left out (nested CV on the tuning splits, then the held-out splits; the code is in the
git history as "a v2 candidate"): reading the passage's lines as sentences; cutting the claim's reporting lead-ins
("According to the passage,"), the hedges and wrapper nouns the passage lacks; irregular verb forms, number words,
month and country abbreviations in the passage's form; a modal rule by direction; a hedge in the passage ("seems")
never `yes`. They raised AttributionBench dev recall from 12.6% to 14.6% at the same 1.0% false pass, but held
out its test false pass went from 5/250 to 10/250. Adding "the claim's words within two adjacent sentences" cut
the dev false pass to 0.3% and held-out recall below this screen's (11.6% pooled). Also measured and left: any
one missing claim word allowed (18.5% recall at 1.9% false pass on AttributionBench dev, but an added one-word
clause could pass), no hard rules but coverage (18%, demo traps pass), a 1% or 0.5% target (fewer passes only).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import resources

from citegate_assets.lib.support.judge.base import JudgeRequest, JudgeResult, Progress, judge_in_process
from citegate_assets.lib.support.judge.heuristic import claim_parts
from citegate_assets.lib.support.judge.lexical import FEATURE_NAMES, Tree, linear_log_odds, pair_facts, trees_log_odds

SCREEN_MODEL = "citegate-screen-v1"
WEIGHTS_FILE = "screen_weights.json"  # beside this module; written by scripts/train_screen.py
SCREEN_VERDICTS = ("yes", "no", "undecided")


@dataclass(frozen=True)
class HeldOutFigures:
    """The shipped screen on one held-out test split (labels used for nothing else), as (count, of) pairs: the
    table rows of docs/support-gate.md and `citegate demo` are rendered from these, and tests/test_screen.py
    recomputes them."""

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

_MARKER = re.compile(r"\s*\[\d+(?:\s*[,;–-]\s*\d+)*\]")
_FEATURE = {name: i for i, name in enumerate(FEATURE_NAMES)}
# features that must be 0 for `yes`: a quantity missing from the claim's sentence, rebounded or attached to other
# words; a negation mismatch; a restricting clause, named scope or determiner the claim drops; a contrast or
# time-shift marker; another modal force
YES_FORBIDS = (
    "quantity_missing_main",
    "bound_changed",
    "quantity_unanchored",
    "negation_mismatch",
    "dropped_qualifier",
    "dropped_scope",
    "dropped_restrictor",
    "contrast",
    "modal_mismatch",
)


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


def claim_without_markers(claim: str) -> str:
    return _MARKER.sub("", claim).strip()


def yes_score(w: ScreenWeights, features: tuple[float, ...]) -> float:
    """P(supported) as log-odds: the mean of the regression's and the trees' (lexical.yes_probability's form)."""
    return (linear_log_odds(w.coef, w.mean, w.scale, features) + trees_log_odds(w.trees_base, w.trees, features)) / 2


def rules_allow_yes(features: tuple[float, ...]) -> bool:
    """The hard rules on the features alone: all claim content words present, none of YES_FORBIDS."""
    return features[_FEATURE["coverage"]] >= 1.0 and not any(features[_FEATURE[name]] for name in YES_FORBIDS)


def screen_verdict(passage: str, claim: str, weights: ScreenWeights | None = None) -> str:
    """'yes' | 'no' | 'undecided' for one (passage, claim) pair, deterministically."""
    w = weights or load_screen_weights()
    claim = claim_without_markers(claim)
    facts = pair_facts(passage, claim)
    if facts.thin:
        return "undecided"  # nothing but numbers and stopwords: not this screen's to decide
    f = facts.features
    if not facts.quantity_missing and not facts.contradiction and rules_allow_yes(f):
        if yes_score(w, f) >= w.yes_threshold:
            return "yes"
    if f[_FEATURE["coverage"]] < w.no_coverage_below and len(claim_parts(claim).content) >= w.no_min_content_words:
        return "no"
    return "undecided"


class ScreenJudge:
    """The Judge protocol over `screen_verdict`: no network, no tokens, deterministic; verdicts yes/no/undecided."""

    model = SCREEN_MODEL

    def __init__(self, weights: ScreenWeights | None = None, workers: int = 1):
        self.weights = weights or load_screen_weights()
        self.model = self.weights.model
        self.workers = workers  # processes for a large pass (lib/core/processes.py)

    def judge(self, requests: list[JudgeRequest], progress: Progress | None = None) -> list[JudgeResult]:
        return judge_in_process(requests, partial(screen_verdict, weights=self.weights), progress, self.workers)
