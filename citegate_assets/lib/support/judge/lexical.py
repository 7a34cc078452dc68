"""The learned offline judge: a logistic regression and a small boosted tree ensemble over lexical, numeric,
negation, qualifier and alignment features of (passage, claim), with its weights in a small JSON file shipped in
the package (no model download, no scikit-learn: the trees are nested lists walked in pure Python).

It replaces the hand-tuned rules of `citegate-heuristic-v1` (heuristic.py) as the default offline judge.
The rules said "yes" only to near-verbatim support; this judge learns how much coverage, alignment and
agreement of numbers and negations real hand labels need, and its "yes" threshold is chosen for a
cross-validated false pass rate of at most 5% (scripts/train_judge.py, `make train-judge`).

Features (FEATURE_NAMES; all from the heuristic's reading of the pair, `heuristic.pair_signals`: its tokenizer,
stemmer, sentence splitter, window and checks):
- coverage: the share of the claim's content words anywhere in the passage, in the best window (the
  heuristic's main sentence and antecedent), in the best two sentences, weighted by word length, with
  prefix matches ("approv" ~ "approval"), of the claim's capitalised words (names), and of its
  character 4-grams; the number of missing content words;
- alignment: the share of the claim's content bigrams found in order in one sentence, the longest run
  of claim words found in a row, and the heuristic's chain breaks per link;
- numbers: claim quantities missing from the passage or from the main sentence, a changed number, a
  changed bound ("up to 12%" for "12%"), a quantity attached to other words;
- negation: a negation in one text and not the other, or governing other words;
- qualifiers: a restricting clause, named scope or determiner the claim drops, a contrast or
  time-shift marker, a different modal force;
- the heuristic's own verdict, the claim's size, and how many of the passage's sentences share at least
  RELATED_WORDS claim words (evidence spread over several sentences), in number and as a share. The
  passage's length itself is not a feature: on WiCE it stands for how many evidence sentences the
  annotators found, a trait of how that data set was built, and it would reward any long chunk.

Verdicts: "yes" when P(supported) >= the threshold, and never when a claim quantity is missing from the
passage, when the claim has no content word, or when the heuristic finds a contradiction; else "no"
when P(not supported) >= 0.5 (a second, linear model over the same features); else "partial". P(supported) is
the mean of the logistic regression's and the trees' log-odds: the trees add interactions ("full coverage,
but a dropped qualifier"), the regression keeps the score smooth.

Tried and left out, because none raised the nested cross-validated recall at 5% false pass (each sat within
the fold-seed noise or below): Snowball (Porter2) stems, IDF-weighted coverage (document frequencies from the
training passages), coverage of the claim's three rarest words, character 5-grams of the best sentence, word
bigram and trigram coverage, capitalised name phrases found verbatim, a year of the claim missing, a claim that
opens with a pronoun, coverage counted only in sentences sharing 2-3 claim words, accent-folded coverage,
number words ("three" = "3"), and missing capitalised vs lowercase words.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache, partial
from importlib import resources

from citegate_assets.lib.core.tokens import content_words
from citegate_assets.lib.support.judge.base import JudgeRequest, JudgeResult, Progress, judge_in_process
from citegate_assets.lib.support.judge.heuristic import claim_parts, pair_signals, read_passage

LEXICAL_MODEL = "citegate-lexical-v3"
WEIGHTS_FILE = "lexical_weights.json"  # beside this module; written by scripts/train_judge.py

FEATURE_NAMES = (
    "coverage",
    "coverage_window",
    "coverage_two_sentences",
    "coverage_weighted",
    "coverage_prefix",
    "coverage_names",
    "has_names",
    "coverage_char4",
    "missing_words_log",
    "missing_long_words_log",
    "missing_run",
    "coverage_three_sentences",
    "worst_clause",
    "clauses_log",
    "claim_words_log",
    "bigrams_in_order",
    "longest_run",
    "chain_breaks",
    "quantities_log",
    "quantity_missing",
    "quantity_missing_main",
    "number_changed",
    "bound_changed",
    "quantity_unanchored",
    "claim_negated",
    "main_negated",
    "negation_mismatch",
    "dropped_qualifier",
    "dropped_scope",
    "dropped_restrictor",
    "contrast",
    "modal_mismatch",
    "heuristic_yes",
    "heuristic_no",
    "related_sentences_log",
    "related_share",
)

_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'-]*")
_ALNUM = re.compile(r"[^a-z0-9]+")
# where a claim splits into parts that each need support: "X was born in Y, and moved to Z in 1990"
_CLAUSE_SPLIT = re.compile(r"[,;:()]|\s(?:and|but|while|whereas|which|who|where|after|before|as well as)\s")
RELATED_WORDS = 2  # claim content words a sentence shares to count as evidence for part of the claim
LONG_WORD = 6  # a missing content word this long usually names something (not "also", "made")
PREFIX = 5  # characters two words must share to count as a prefix match


def _char_grams(text: str, n: int = 4) -> set[str]:
    t = _ALNUM.sub(" ", text.lower()).strip()
    return {t[i : i + n] for i in range(len(t) - n + 1)} if len(t) >= n else ({t} if t else set())


@lru_cache(maxsize=4096)
def _passage_grams(text: str) -> frozenset[str]:
    return frozenset(_char_grams(text))


def _bigrams(seq: list[str]) -> set[tuple[str, str]]:
    """Ordered pairs of content words at most one word apart: ("annual", "discount")."""
    out = set()
    for i, w in enumerate(seq):
        for j in (i + 1, i + 2):
            if j < len(seq):
                out.add((w, seq[j]))
    return out


def _longest_run(claim_seq: list[str], positions: tuple[dict[str, list[int]], ...]) -> int:
    """The longest run of consecutive claim content words found consecutively in one sentence; positions: each
    sentence's content words -> where they stand in it (_PassageSide)."""
    best = 0
    for where in positions:
        prev: dict[int, int] = {}
        for w in claim_seq:
            cur: dict[int, int] = {}
            for j in where.get(w, ()):
                cur[j] = prev.get(j - 1, 0) + 1
                best = max(best, cur[j])
            prev = cur
    return best


@dataclass(frozen=True)
class _PassageSide:
    """What pair_facts reads of a passage alone, once per passage (best evidence judges one against many claims)."""

    bigrams: tuple[set[tuple[str, str]], ...]  # each sentence's _bigrams
    positions: tuple[dict[str, list[int]], ...]  # each sentence's content words -> their places in it
    prefixes: frozenset[str]  # the first PREFIX characters of its content words that long


@lru_cache(maxsize=4096)
def _passage_side(passage: str) -> _PassageSide:
    p = read_passage(passage)
    positions = []
    for seq in p.seqs:
        where: dict[str, list[int]] = {}
        for j, w in enumerate(seq):
            where.setdefault(w, []).append(j)
        positions.append(where)
    return _PassageSide(
        bigrams=tuple(_bigrams(seq) for seq in p.seqs),
        positions=tuple(positions),
        prefixes=frozenset(w[:PREFIX] for w in p.all_content if len(w) >= PREFIX),
    )


@dataclass(frozen=True)
class _ClaimSide:
    """What pair_facts reads of a claim alone, once per claim (judged against each of its candidates)."""

    clauses: tuple[set[str], ...]  # the content words of each part _CLAUSE_SPLIT gives, of those with 2 or more
    names: frozenset[str]  # the content words of its capitalised words
    grams: frozenset[str]  # its character 4-grams
    bigrams: frozenset[tuple[str, str]]


@lru_cache(maxsize=4096)
def _claim_side(claim: str) -> _ClaimSide:
    parts = claim_parts(claim)
    text = parts.text
    return _ClaimSide(
        clauses=tuple(c for c in (set(content_words(part)) for part in _CLAUSE_SPLIT.split(text)) if len(c) >= 2),
        names=frozenset(w for m in _CAPITALISED.findall(text) for w in content_words(m)),
        grams=frozenset(_char_grams(text)),
        bigrams=frozenset(_bigrams(parts.seq)),
    )


@dataclass(frozen=True)
class PairFacts:
    """What the verdict needs besides the features: the hard vetoes."""

    features: tuple[float, ...]
    thin: bool  # the claim has no content word
    quantity_missing: bool  # a claim quantity is nowhere in the passage
    contradiction: bool  # the heuristic says "no" (a flipped negation or a changed number, or unrelated)


def pair_facts(passage: str, claim: str) -> PairFacts:
    """The features of one (passage, claim) pair, in FEATURE_NAMES order, and the vetoes."""
    sig = pair_signals(passage, claim)
    p, parts = sig.passage, sig.claim
    claim_seq = parts.seq
    claim_content, claim_quantities = set(parts.content), parts.quantities
    missing_q = bool(sig.missing_quantities)
    contradiction = sig.verdict == "no"
    n = len(claim_content)
    if not n:
        zeros = tuple(0.0 for _ in FEATURE_NAMES)
        return PairFacts(zeros, thin=True, quantity_missing=missing_q, contradiction=contradiction)

    found = claim_content & p.all_content
    main = sig.main

    # the best two and three sentences: the main one, then greedily the one adding most of the rest
    covered = claim_content & p.content[main]
    greedy = []
    for _ in range(2):
        rest = claim_content - covered
        gain = max(((len(rest & c), -i) for i, c in enumerate(p.content)), default=(0, 0))
        covered = covered | (claim_content & p.content[-gain[1]]) if gain[0] else covered
        greedy.append(len(covered) / n)

    missing = [w not in found for w in claim_seq]
    run = longest = 0
    for m in missing:
        run = run + 1 if m else 0
        longest = max(longest, run)
    side, own = _passage_side(passage), _claim_side(claim)
    clauses = own.clauses
    worst = min((len(c & p.all_content) / len(c) for c in clauses), default=len(found) / n)

    weighted = sum(len(w) for w in found) / sum(len(w) for w in claim_content)
    prefixes = side.prefixes
    soft = sum(1 for w in claim_content if w in found or (len(w) >= PREFIX and w[:PREFIX] in prefixes)) / n

    names = own.names
    names_coverage = len(names & p.all_content) / len(names) if names else 1.0

    claim_grams = own.grams
    grams = len(claim_grams & _passage_grams(passage)) / len(claim_grams) if claim_grams else 0.0

    claim_bigrams = own.bigrams
    in_order = max((len(claim_bigrams & b) for b in side.bigrams), default=0)
    bigrams = in_order / len(claim_bigrams) if claim_bigrams else sig.coverage

    missing_here = bool(sig.missing_here)
    related = sum(1 for c in p.content if len(claim_content & c) >= RELATED_WORDS)

    features = (
        len(found) / n,
        sig.coverage,
        greedy[0],
        weighted,
        soft,
        names_coverage,
        float(bool(names)),
        grams,
        math.log1p(n - len(found)),
        math.log1p(sum(1 for w in claim_content - found if len(w) >= LONG_WORD)),
        longest / len(claim_seq),
        greedy[1],
        worst,
        math.log1p(len(clauses)),
        math.log1p(n),
        bigrams,
        _longest_run(claim_seq, side.positions) / n,
        sig.chain[0] / sig.chain[1] if sig.chain[1] else 0.0,
        math.log1p(len(claim_quantities)),
        float(missing_q),
        float(missing_here),
        float(missing_here and sig.changed_number),
        float(sig.bound_changed),
        float(sig.unanchored_quantity),
        float(sig.claim_negated),
        float(p.negated[main]),
        float(sig.negation_mismatch),
        float(sig.dropped_qualifier),
        float(sig.dropped_scope),
        float(sig.dropped_restrictor),
        float(sig.contrast),
        float(sig.modal_mismatch),
        float(sig.verdict == "yes"),
        float(contradiction),
        math.log1p(related),
        related / len(p.sentences),
    )
    return PairFacts(features, thin=False, quantity_missing=missing_q, contradiction=contradiction)


Tree = float | list  # a leaf's value, or [feature index, cut, subtree if the feature < cut, subtree otherwise]


@dataclass(frozen=True)
class Weights:
    """A trained judge: the standardisation (mean, scale) of the features; for "yes" a logistic regression and a
    boosted tree ensemble whose log-odds are averaged; for "no" a logistic regression; the thresholds."""

    model: str
    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    yes: tuple[float, ...]  # intercept first, then one per feature (on standardised features)
    yes_trees_base: float  # the ensemble's starting log-odds
    yes_trees: tuple[Tree, ...]  # on the raw features; leaves hold the learning rate times the fitted value
    no: tuple[float, ...]
    yes_threshold: float
    no_threshold: float

    @classmethod
    def from_dict(cls, d: dict) -> Weights:
        return cls(
            model=d["model"],
            features=tuple(d["features"]),
            mean=tuple(d["mean"]),
            scale=tuple(d["scale"]),
            yes=tuple(d["yes"]["coef"]),
            yes_trees_base=float(d["yes"]["trees_base"]),
            yes_trees=tuple(d["yes"]["trees"]),
            no=tuple(d["no"]["coef"]),
            yes_threshold=float(d["yes"]["threshold"]),
            no_threshold=float(d["no"]["threshold"]),
        )


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


def linear_log_odds(coef: tuple[float, ...] | list[float], mean, scale, features) -> float:
    return coef[0] + sum(c * (x - m) / s for c, x, m, s in zip(coef[1:], features, mean, scale))


def probability(coef: tuple[float, ...] | list[float], mean, scale, features) -> float:
    return _sigmoid(linear_log_odds(coef, mean, scale, features))


def trees_log_odds(base: float, trees: tuple[Tree, ...] | list[Tree], features) -> float:
    total = base
    for node in trees:
        while isinstance(node, list):
            node = node[2] if features[node[0]] < node[1] else node[3]
        total += node
    return total


def yes_probability(w: Weights, features) -> float:
    """P(supported): the mean of the logistic regression's and the tree ensemble's log-odds."""
    linear = linear_log_odds(w.yes, w.mean, w.scale, features)
    return _sigmoid((linear + trees_log_odds(w.yes_trees_base, w.yes_trees, features)) / 2.0)


@lru_cache(maxsize=1)
def load_weights() -> Weights:
    text = resources.files(__package__).joinpath(WEIGHTS_FILE).read_text(encoding="utf-8")
    w = Weights.from_dict(json.loads(text))
    if w.features != FEATURE_NAMES:
        raise ValueError(f"{WEIGHTS_FILE}: trained on other features than FEATURE_NAMES; run make train-judge")
    return w


def decide(facts: PairFacts, p_yes: float, p_no: float, weights: Weights) -> str:
    if facts.thin:
        return "no"
    if p_yes >= weights.yes_threshold and not facts.quantity_missing and not facts.contradiction:
        return "yes"
    return "no" if p_no >= weights.no_threshold else "partial"


def scores(passage: str, claim: str, weights: Weights | None = None) -> tuple[PairFacts, float, float]:
    w = weights or load_weights()
    facts = pair_facts(passage, claim)
    return (
        facts,
        yes_probability(w, facts.features),
        probability(w.no, w.mean, w.scale, facts.features),
    )


def lexical_verdict(passage: str, claim: str, weights: Weights | None = None) -> str:
    """'yes' | 'partial' | 'no' for one (passage, claim) pair, deterministically."""
    w = weights or load_weights()
    facts, p_yes, p_no = scores(passage, claim, w)
    return decide(facts, p_yes, p_no, w)


class LexicalJudge:
    """The Judge protocol over `lexical_verdict`: no network, no tokens, deterministic."""

    model = LEXICAL_MODEL

    def __init__(self, weights: Weights | None = None, workers: int = 1):
        self.weights = weights or load_weights()
        self.model = self.weights.model
        self.workers = workers  # processes for a large pass (lib/core/processes.py)

    def judge(self, requests: list[JudgeRequest], progress: Progress | None = None) -> list[JudgeResult]:
        return judge_in_process(requests, partial(lexical_verdict, weights=self.weights), progress, self.workers)
