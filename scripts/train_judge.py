"""Train the offline judge citegate-lexical-v3 (`make train-judge`) and report its cross-validated figures.

Data: the WiCE oracle retrieval data, dev split (labels/wice/dev-labels.jsonl, 1,043 pairs, ODC-BY; see
labels/wice/README.md) and the demo labels (labels/demo-labels.jsonl, 224 pairs). Features: FEATURE_NAMES of
citegate_assets/lib/support/judge/lexical.py. Models, all deterministic (no random start, no sampling): P(yes) against
partial+no is the mean log-odds of an L2-regularised logistic regression on standardised features (Newton's
method) and of TREES gradient-boosted trees of depth DEPTH on the raw features (Newton steps on the logistic
loss, splits at BINS quantile cuts); P(no) against yes+partial is a logistic regression alone. Each demo pair
is fitted DEMO_WEIGHT times (the thresholds and the figures count it once): 224 pairs of the product's own kind
of text beside 1,043 WiCE pairs. L2, DEMO_WEIGHT and the tree settings were chosen by comparing nested
cross-validated figures over 5 fold seeds, so those figures are slightly optimistic.

Held out properly: the folds split groups, not pairs (a WiCE claim's passages stay together, and so do the
demo claims written on one passage), shuffled with a fixed seed. The "yes" threshold is the lowest score at
which the out-of-fold false pass rate (judge yes on human no or partial, both datasets together) is at most
TARGET_FALSE_PASS. The reported figures are nested: for each of the 5 outer folds, the model and its threshold
are chosen on the other 4 folds alone (the threshold by an inner 5-fold split), then the held-out fold is judged.
The shipped model is fitted on all pairs, its threshold chosen by one 5-fold split of all pairs.

    .venv/bin/python scripts/train_judge.py            # train, write the weights, print the report
    .venv/bin/python scripts/train_judge.py --check    # fail if the shipped weights differ from a fresh training
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from citegate_assets.lib.calibration.rates import wilson_interval  # noqa: E402
from citegate_assets.lib.support.judge.heuristic import HEURISTIC_MODEL, heuristic_verdict  # noqa: E402
from citegate_assets.lib.support.judge.lexical import (  # noqa: E402
    FEATURE_NAMES,
    LEXICAL_MODEL,
    WEIGHTS_FILE,
    PairFacts,
    pair_facts,
)

DATASETS = {
    "wice": PROJECT / "labels" / "wice" / "dev-labels.jsonl",
    "demo": PROJECT / "labels" / "demo-labels.jsonl",
}
WEIGHTS_PATH = PROJECT / "citegate_assets" / "lib" / "support" / "judge" / WEIGHTS_FILE
SEED = 15
FOLDS = 5
L2 = 10.0  # ridge penalty on the standardised coefficients (not the intercept)
DEMO_WEIGHT = 2  # each demo pair is fitted this many times: the product's own kind of text gets a fair say
TREES = 100  # boosting rounds of the "yes" tree ensemble
RATE = 0.1  # learning rate (shrinkage) of each tree
DEPTH = 2  # splits from root to leaf: pairs of features interact, e.g. full coverage but a dropped qualifier
BINS = 16  # candidate cuts per feature: its quantiles over the training pairs
MIN_LEAF = 10  # pairs a leaf must hold
TREE_L2 = 1.0  # ridge penalty on a leaf's value
TARGET_FALSE_PASS = 0.05
NO_THRESHOLD = 0.5
DIGITS = 6  # significant digits kept in the weights file, so a retraining writes the same bytes


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def group_of(dataset: str, row: dict) -> str:
    """WiCE: the claim (ids are wice-devNNNNN-K, K the passage); demo: the passage the claims were written on."""
    return f"wice:{row['id'].rsplit('-', 1)[0]}" if dataset == "wice" else f"demo:{row['passage']}"


def folds_of(groups: Sequence[str], k: int, seed: int) -> np.ndarray:
    names = sorted(set(groups))
    random.Random(seed).shuffle(names)
    fold = {g: i % k for i, g in enumerate(names)}
    return np.array([fold[g] for g in groups])


def fit(x: np.ndarray, t: np.ndarray, l2: float = L2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, scale, coefficients with the intercept first) of an L2 logistic regression, by Newton's method."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(z.shape[1])
    ridge = l2 * np.eye(len(w))
    ridge[0, 0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - t) + ridge @ w
        hess = (z * (p * (1 - p))[:, None]).T @ z + ridge
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-12:
            break
    return mean, scale, w


def predict(model: tuple[np.ndarray, np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    mean, scale, w = model
    z = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    return 1.0 / (1.0 + np.exp(-(z @ w)))


def log_odds(model: tuple[np.ndarray, np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    mean, scale, w = model
    return np.hstack([np.ones((len(x), 1)), (x - mean) / scale]) @ w


Tree = float | list  # as lexical.py reads it: a leaf's value or [feature, cut, tree if x[feature] < cut, tree else]


def cuts_of(x: np.ndarray) -> list[np.ndarray]:
    """Per feature the distinct quantile cuts, rounded as the weights file keeps them (so the shipped trees split
    the training pairs exactly as the fitted ones did)."""
    qs = np.quantile(x, np.linspace(0, 1, BINS + 1)[1:-1], axis=0)
    return [np.unique(rounded(qs[:, j])) for j in range(x.shape[1])]


def grow(
    bins: np.ndarray, cuts: list[np.ndarray], g: np.ndarray, h: np.ndarray, idx: np.ndarray, depth: int
) -> tuple[Tree, list[tuple[np.ndarray, float]]]:
    """One tree on the rows idx: the split with the largest Newton gain, recursively; the tree and its leaves.
    bins[i, j] is row i's bin of feature j, offset by j * BINS so one bincount sums every feature at once."""
    grad, hess = g[idx].sum(), h[idx].sum()
    leaf = float(-grad / (hess + TREE_L2))
    if depth == 0 or len(idx) < 2 * MIN_LEAF:
        return leaf, [(idx, leaf)]
    width = len(cuts) * BINS
    flat = bins[idx].ravel()
    per_row = bins.shape[1]
    gl = np.cumsum(np.bincount(flat, np.repeat(g[idx], per_row), width).reshape(-1, BINS), axis=1)[:, :-1]
    hl = np.cumsum(np.bincount(flat, np.repeat(h[idx], per_row), width).reshape(-1, BINS), axis=1)[:, :-1]
    nl = np.cumsum(np.bincount(flat, None, width).reshape(-1, BINS), axis=1)[:, :-1]
    gain = gl**2 / (hl + TREE_L2) + (grad - gl) ** 2 / (hess - hl + TREE_L2) - grad**2 / (hess + TREE_L2)
    real = np.arange(BINS - 1)[None, :] < np.array([len(c) for c in cuts])[:, None]
    gain[(nl < MIN_LEAF) | (len(idx) - nl < MIN_LEAF) | ~real] = 0.0
    j, k = (int(v) for v in np.unravel_index(int(np.argmax(gain)), gain.shape))  # the first of equal gains
    if gain[j, k] <= 1e-12:
        return leaf, [(idx, leaf)]
    left = bins[idx, j] - j * BINS <= k  # bin <= k  <=>  x < cuts[j][k]
    lt, ll = grow(bins, cuts, g, h, idx[left], depth - 1)
    rt, rl = grow(bins, cuts, g, h, idx[~left], depth - 1)
    return [j, float(cuts[j][k]), lt, rt], ll + rl


def fit_trees(x: np.ndarray, t: np.ndarray) -> tuple[float, list[Tree]]:
    """(base log-odds, trees) of TREES boosted trees; each leaf already multiplied by RATE."""
    cuts = cuts_of(x)
    bins = np.stack([np.searchsorted(c, x[:, j], side="right") + j * BINS for j, c in enumerate(cuts)], axis=1)
    p0 = min(max(float(t.mean()), 1e-3), 1 - 1e-3)
    base = float(np.log(p0 / (1 - p0)))
    f = np.full(len(t), base)
    trees: list[Tree] = []
    for _ in range(TREES):
        p = 1.0 / (1.0 + np.exp(-f))
        tree, leaves = grow(bins, cuts, p - t, p * (1 - p), np.arange(len(t)), DEPTH)
        for rows, value in leaves:
            f[rows] += RATE * value
        trees.append(scaled(tree))
    return base, trees


def scaled(tree: Tree) -> Tree:
    return RATE * tree if isinstance(tree, float) else [tree[0], tree[1], scaled(tree[2]), scaled(tree[3])]


def trees_log_odds(model: tuple[float, list[Tree]], x: np.ndarray) -> np.ndarray:
    base, trees = model
    out = np.full(len(x), base)
    for tree in trees:
        out += tree_values(tree, x)
    return out


def tree_values(tree: Tree, x: np.ndarray) -> np.ndarray:
    if not isinstance(tree, list):
        return np.full(len(x), tree)
    j, cut, left, right = tree
    out = np.empty(len(x))
    go_left = x[:, j] < cut
    out[go_left] = tree_values(left, x[go_left])
    out[~go_left] = tree_values(right, x[~go_left])
    return out


YesModel = tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[float, list[Tree]]]


def fit_yes(x: np.ndarray, t: np.ndarray) -> YesModel:
    return fit(x, t), fit_trees(x, t)


def predict_yes(model: YesModel, x: np.ndarray) -> np.ndarray:
    """As lexical.yes_probability: the mean of the two models' log-odds."""
    linear, trees = model
    return 1.0 / (1.0 + np.exp(-(log_odds(linear, x) + trees_log_odds(trees, x)) / 2.0))


class Data:
    def __init__(self, rows: list[tuple[str, dict, PairFacts]]):
        self.dataset = np.array([d for d, _, _ in rows])
        self.label = np.array([r["label"] for _, r, _ in rows])
        self.groups = [group_of(d, r) for d, r, _ in rows]
        self.x = np.array([f.features for _, _, f in rows], dtype=float)
        # pairs the judge never passes whatever the model says (lexical.decide)
        self.veto = np.array([f.thin or f.quantity_missing or f.contradiction for _, _, f in rows])
        self.heuristic = np.array([heuristic_verdict(r["passage"], r["claim"]) for _, r, _ in rows])


def fitted(data: Data, idx: np.ndarray) -> np.ndarray:
    """The rows a model is fitted on: idx, with each demo pair DEMO_WEIGHT times (the threshold counts it once)."""
    return np.repeat(idx, np.where(data.dataset[idx] == "demo", DEMO_WEIGHT, 1))


def yes_scores(data: Data, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    train = fitted(data, train)
    model = fit_yes(data.x[train], (data.label[train] == "yes").astype(float))
    return np.where(data.veto[test], 0.0, predict_yes(model, data.x[test]))


def threshold_for(scores: np.ndarray, negative: np.ndarray, target: float = TARGET_FALSE_PASS) -> float:
    """The lowest score t such that the share of negatives scoring >= t is at most `target`."""
    allowed = int(np.floor(target * negative.sum() + 1e-9))
    neg = np.sort(scores[negative])[::-1]
    if allowed >= len(neg):
        return float(np.min(scores))
    # above the (allowed+1)-th highest negative score; ties with it would pass it too
    cut = neg[allowed]
    above = scores[scores > cut]
    return float(np.min(above)) if len(above) else 1.0


def choose_threshold(data: Data, idx: np.ndarray, seed: int) -> float:
    """Out-of-fold scores over `idx` by a 5-fold group split, then the threshold for TARGET_FALSE_PASS."""
    folds = folds_of([data.groups[i] for i in idx], FOLDS, seed)
    oof = np.zeros(len(idx))
    for k in range(FOLDS):
        oof[folds == k] = yes_scores(data, idx[folds != k], idx[folds == k])
    return threshold_for(oof, data.label[idx] != "yes")


def nested_cv(data: Data, seed: int) -> np.ndarray:
    """The judge's yes/not-yes on every pair, each from a model and threshold chosen without its fold."""
    idx = np.arange(len(data.label))
    folds = folds_of(data.groups, FOLDS, seed)
    passed = np.zeros(len(idx), dtype=bool)
    for k in range(FOLDS):
        train, test = idx[folds != k], idx[folds == k]
        t = choose_threshold(data, train, seed + 1)
        passed[test] = yes_scores(data, train, test) >= t
    return passed


def rates(passed: np.ndarray, label: np.ndarray) -> dict:
    neg, no, pos = label != "yes", label == "no", label == "yes"
    fp, n_neg = int(passed[neg].sum()), int(neg.sum())
    low, high = wilson_interval(fp, n_neg)
    return {
        "false_pass": fp,
        "negatives": n_neg,
        "false_pass_rate": fp / n_neg,
        "wilson_low": low,
        "wilson_high": high,
        "false_pass_no": int(passed[no].sum()),
        "no": int(no.sum()),
        "passed_yes": int(passed[pos].sum()),
        "yes": int(pos.sum()),
        "recall": float(passed[pos].mean()),
    }


def rounded(values) -> list[float]:
    return [float(f"{float(v):.{DIGITS}g}") for v in values]


def train(data: Data) -> dict:
    idx = np.arange(len(data.label))
    rows = fitted(data, idx)
    x, label = data.x[rows], data.label[rows]
    mean, scale, yes = fit(x, (label == "yes").astype(float))
    base, trees = fit_trees(x, (label == "yes").astype(float))
    _, _, no = fit(x, (label == "no").astype(float))
    return {
        "model": LEXICAL_MODEL,
        "trained_on": {name: f"labels/{path.relative_to(PROJECT / 'labels')}" for name, path in DATASETS.items()},
        "pairs": len(idx),
        "demo_weight": DEMO_WEIGHT,
        "seed": SEED,
        "l2": L2,
        "trees": {"count": TREES, "rate": RATE, "depth": DEPTH, "bins": BINS, "min_leaf": MIN_LEAF, "l2": TREE_L2},
        "target_false_pass": TARGET_FALSE_PASS,
        "features": list(FEATURE_NAMES),
        "mean": rounded(mean),
        "scale": rounded(scale),
        "yes": {
            "coef": rounded(yes),
            "threshold": rounded([choose_threshold(data, idx, SEED)])[0],
            "trees_base": rounded([base])[0],
            "trees": [rounded_tree(t) for t in trees],
        },
        "no": {"coef": rounded(no), "threshold": NO_THRESHOLD},
    }


def rounded_tree(tree: Tree) -> Tree:
    if not isinstance(tree, list):
        return rounded([tree])[0]
    return [tree[0], tree[1], rounded_tree(tree[2]), rounded_tree(tree[3])]


def percent(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def report_line(name: str, judge: str, r: dict) -> str:
    return (
        f"| {name} | `{judge}` | {r['false_pass']}/{r['negatives']} = {percent(r['false_pass_rate'])} "
        f"[{percent(r['wilson_low'])}, {percent(r['wilson_high'])}] | {r['false_pass_no']}/{r['no']} | "
        f"{r['passed_yes']}/{r['yes']} = {percent(r['recall'])} |"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped weights instead of writing")
    ap.add_argument("--seeds", type=int, default=1, help="also repeat the nested CV over this many fold seeds")
    args = ap.parse_args(argv)

    rows = [(name, r, pair_facts(r["passage"], r["claim"])) for name, path in DATASETS.items() for r in load(path)]
    data = Data(rows)
    weights = train(data)
    text = json.dumps(weights, indent=1) + "\n"
    if args.check:
        same = WEIGHTS_PATH.exists() and WEIGHTS_PATH.read_text(encoding="utf-8") == text
        print(f"{WEIGHTS_PATH.relative_to(PROJECT)}: {'up to date' if same else 'DIFFERS from a fresh training'}")
        return 0 if same else 1
    WEIGHTS_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {WEIGHTS_PATH.relative_to(PROJECT)} (yes threshold {weights['yes']['threshold']})")

    passed = nested_cv(data, SEED)
    print(f"\n{FOLDS}-fold cross-validated (nested, groups held out, seed {SEED}); yes on human no+partial:")
    print("| labels | judge | false pass (95% Wilson) | on human no | recall on yes |")
    print("|---|---|---|---|---|")
    for name in DATASETS:
        m = data.dataset == name
        print(report_line(name, HEURISTIC_MODEL, rates(data.heuristic[m] == "yes", data.label[m])))
        print(report_line(name, LEXICAL_MODEL, rates(passed[m], data.label[m])))
    if args.seeds > 1:
        runs = [nested_cv(data, SEED + 100 * s) for s in range(args.seeds)]
        for name in DATASETS:
            m = data.dataset == name
            figures = [rates(passed[m], data.label[m]) for passed in runs]
            for s, r in enumerate(figures):
                print(
                    f"{name}, fold seed {SEED + 100 * s}: false pass {r['false_pass']}/{r['negatives']} = "
                    f"{percent(r['false_pass_rate'])}, recall {r['passed_yes']}/{r['yes']} = {percent(r['recall'])}"
                )
            fps = [r["false_pass_rate"] for r in figures]
            recalls = [r["recall"] for r in figures]
            print(
                f"{name}, {args.seeds} fold seeds: false pass {percent(min(fps))}..{percent(max(fps))} "
                f"(mean {percent(sum(fps) / len(fps))}), recall {percent(min(recalls))}..{percent(max(recalls))} "
                f"(mean {percent(sum(recalls) / len(recalls))})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
