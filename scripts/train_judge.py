"""Train the offline judge citegate-lexical-v2 (`make train-judge`) and report its cross-validated figures.

Data: the WiCE oracle retrieval data, dev split (labels/wice/dev-labels.jsonl, 1,043 pairs, ODC-BY; see
labels/wice/README.md) and the demo labels (labels/demo-labels.jsonl, 224 pairs). Features: FEATURE_NAMES of
citegate_assets/lib/judge/lexical.py. Models: two L2-regularised logistic regressions on standardised features,
fitted by Newton's method (deterministic: no random start, no sampling): P(yes) against partial+no, and P(no)
against yes+partial.

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

from citegate_assets.lib.calibration import wilson_interval  # noqa: E402
from citegate_assets.lib.judge.heuristic import HEURISTIC_MODEL, heuristic_verdict  # noqa: E402
from citegate_assets.lib.judge.lexical import (  # noqa: E402
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
WEIGHTS_PATH = PROJECT / "citegate_assets" / "lib" / "judge" / WEIGHTS_FILE
SEED = 15
FOLDS = 5
L2 = 1.0  # ridge penalty on the standardised coefficients (not the intercept)
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


class Data:
    def __init__(self, rows: list[tuple[str, dict, PairFacts]]):
        self.dataset = np.array([d for d, _, _ in rows])
        self.label = np.array([r["label"] for _, r, _ in rows])
        self.groups = [group_of(d, r) for d, r, _ in rows]
        self.x = np.array([f.features for _, _, f in rows], dtype=float)
        # pairs the judge never passes whatever the model says (lexical.decide)
        self.veto = np.array([f.thin or f.quantity_missing or f.contradiction for _, _, f in rows])
        self.heuristic = np.array([heuristic_verdict(r["passage"], r["claim"]) for _, r, _ in rows])


def yes_scores(data: Data, train: np.ndarray, test: np.ndarray) -> np.ndarray:
    model = fit(data.x[train], (data.label[train] == "yes").astype(float))
    return np.where(data.veto[test], 0.0, predict(model, data.x[test]))


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
    mean, scale, yes = fit(data.x, (data.label == "yes").astype(float))
    _, _, no = fit(data.x, (data.label == "no").astype(float))
    return {
        "model": LEXICAL_MODEL,
        "trained_on": {name: f"labels/{path.relative_to(PROJECT / 'labels')}" for name, path in DATASETS.items()},
        "pairs": len(idx),
        "seed": SEED,
        "l2": L2,
        "target_false_pass": TARGET_FALSE_PASS,
        "features": list(FEATURE_NAMES),
        "mean": rounded(mean),
        "scale": rounded(scale),
        "yes": {"coef": rounded(yes), "threshold": rounded([choose_threshold(data, idx, SEED)])[0]},
        "no": {"coef": rounded(no), "threshold": NO_THRESHOLD},
    }


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
        for name in DATASETS:
            m = data.dataset == name
            runs = [rates(nested_cv(data, SEED + 100 * s)[m], data.label[m]) for s in range(args.seeds)]
            fps = [r["false_pass_rate"] for r in runs]
            recalls = [r["recall"] for r in runs]
            print(
                f"{name}, {args.seeds} fold seeds: false pass {percent(min(fps))}..{percent(max(fps))} "
                f"(mean {percent(sum(fps) / len(fps))}), recall {percent(min(recalls))}..{percent(max(recalls))} "
                f"(mean {percent(sum(recalls) / len(recalls))})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
