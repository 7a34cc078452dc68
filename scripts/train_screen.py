"""Train the screen citegate-screen-v1 (`make train-judge`) and report its figures on tuning and held-out labels.

Splits (scripts/convert_labels.py writes them; each split's role is fixed here and never changes):
- train/tune: labels/wice/dev-labels.jsonl (WiCE oracle retrieval data, dev split), labels/attributionbench/
  dev-labels.jsonl (AttributionBench dev: claims of generative search engines and LLMs with the references they
  cited) and labels/demo-labels.jsonl (hand-written pairs of the product's kind; fitted DEMO_WEIGHT times);
- test, never read while fitting or choosing anything: labels/wice/test-labels.jsonl (WiCE test split),
  labels/attributionbench/test-labels.jsonl (AttributionBench in-domain test, 500 sampled pairs) and
  labels/attributionbench/test-ood-labels.jsonl (its out-of-domain test: HAGRID, BEGIN, AttrScore-GenSearch).

The model (deterministic: no random start, no sampling): P(yes) against no+partial as the mean log-odds of an
L2 logistic regression and boosted depth-2 trees over the features of lexical.py, fitted on the tuning pairs
that the screen's hard rules allow to pass (screen.py; the others are never `yes`, whatever the score). The
`yes` threshold: 5-fold out-of-fold scores (each claim's pairs held out together, fold seed SEED), then on each
tuning data set apart (WiCE, AttributionBench) the lowest log-odds at which that set's false pass rate (yes on
human no or partial) is at most TARGET_FALSE_PASS; the highest of these. The demo pairs do not set it (too few
negatives to hold 2%). The `no` rule's settings (NO_COVERAGE_BELOW, NO_MIN_CONTENT_WORDS) were chosen on the
tuning splits for a false fail rate (no on human yes) of at most about 2% there.

The tuning figures are nested: for each of 5 outer folds the model and threshold are chosen on the other 4
alone. The test figures are those of the shipped weights, through screen_verdict itself.

    .venv/bin/python scripts/convert_labels.py         # the splits, from local copies of the source repositories
    .venv/bin/python scripts/train_screen.py           # train, write the weights, print the figures
    .venv/bin/python scripts/train_screen.py --check   # fail if the shipped weights differ from a fresh training
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "scripts"))

import train_judge as lexical_training  # noqa: E402
from citegate_assets.lib.calibration.rates import wilson_interval  # noqa: E402
from citegate_assets.lib.support.judge.lexical import FEATURE_NAMES, pair_facts  # noqa: E402
from citegate_assets.lib.support.judge.screen import (  # noqa: E402
    SCREEN_MODEL,
    WEIGHTS_FILE,
    ScreenWeights,
    claim_without_markers,
    rules_allow_yes,
    screen_verdict,
)

TUNE = {
    "wice": PROJECT / "labels" / "wice" / "dev-labels.jsonl",
    "attributionbench": PROJECT / "labels" / "attributionbench" / "dev-labels.jsonl",
    "demo": PROJECT / "labels" / "demo-labels.jsonl",
}
TEST = {
    "WiCE test": PROJECT / "labels" / "wice" / "test-labels.jsonl",
    "AttributionBench test": PROJECT / "labels" / "attributionbench" / "test-labels.jsonl",
    "AttributionBench OOD test": PROJECT / "labels" / "attributionbench" / "test-ood-labels.jsonl",
}
THRESHOLD_SETS = ("wice", "attributionbench")  # each must hold TARGET_FALSE_PASS on its own
WEIGHTS_PATH = PROJECT / "citegate_assets" / "lib" / "support" / "judge" / WEIGHTS_FILE
SEED = 15
FOLDS = 5
DEMO_WEIGHT = 2
TARGET_FALSE_PASS = 0.02  # well under the promised 5%: room for the shift to data the project has never seen
NO_COVERAGE_BELOW = 0.2
NO_MIN_CONTENT_WORDS = 3


def group_of(dataset: str, row: dict) -> str:
    """The pairs held out together: a WiCE claim's passages, an AttributionBench claim, a demo passage's claims."""
    if dataset == "wice":
        return f"wice:{row['id'].rsplit('-', 1)[0]}"
    if dataset == "demo":
        return f"demo:{row['passage']}"
    return f"{dataset}:{row['claim']}"


class Tuning:
    def __init__(self, rows: list[tuple[str, dict]]):
        facts = [pair_facts(r["passage"], claim_without_markers(r["claim"])) for _, r in rows]
        self.dataset = np.array([d for d, _ in rows])
        self.label = np.array([r["label"] for _, r in rows])
        self.groups = [group_of(d, r) for d, r in rows]
        self.x = np.array([f.features for f in facts], dtype=float)
        self.allowed = np.array(
            [not (f.thin or f.quantity_missing or f.contradiction) and rules_allow_yes(f.features) for f in facts]
        )


def fit_yes(data: Tuning, idx: np.ndarray):
    """The model on the rows of idx the rules allow to pass, each demo pair DEMO_WEIGHT times."""
    rows = idx[data.allowed[idx]]
    rows = np.repeat(rows, np.where(data.dataset[rows] == "demo", DEMO_WEIGHT, 1))
    target = (data.label[rows] == "yes").astype(float)
    return lexical_training.fit(data.x[rows], target), lexical_training.fit_trees(data.x[rows], target)


def scores(model, data: Tuning, idx: np.ndarray) -> np.ndarray:
    """Log-odds as screen.yes_score computes them; -inf where the rules forbid `yes`."""
    linear, trees = model
    s = (lexical_training.log_odds(linear, data.x[idx]) + lexical_training.trees_log_odds(trees, data.x[idx])) / 2
    return np.where(data.allowed[idx], s, -np.inf)


def lowest_threshold(s: np.ndarray, negative: np.ndarray, target: float) -> float:
    """The lowest score t such that at most `target` of the negatives score >= t (ties pass together)."""
    allowed = int(np.floor(target * negative.sum() + 1e-9))
    neg = np.sort(s[negative])[::-1]
    if allowed >= len(neg) or not np.isfinite(neg[allowed]):
        finite = s[np.isfinite(s)]
        return float(finite.min()) if len(finite) else float("inf")
    above = s[s > neg[allowed]]
    return float(above.min()) if len(above) else float("inf")


def choose_threshold(data: Tuning, idx: np.ndarray, seed: int) -> float:
    folds = lexical_training.folds_of([data.groups[i] for i in idx], FOLDS, seed)
    oof = np.zeros(len(idx))
    for k in range(FOLDS):
        oof[folds == k] = scores(fit_yes(data, idx[folds != k]), data, idx[folds == k])
    per_set = []
    for name in THRESHOLD_SETS:
        m = data.dataset[idx] == name
        per_set.append(lowest_threshold(oof[m], data.label[idx][m] != "yes", TARGET_FALSE_PASS))
    return max(per_set)


def no_rule(data_rows: list[dict]) -> np.ndarray:
    """The screen's `no` on each row, from the features alone (as screen_verdict decides it)."""
    from citegate_assets.lib.support.judge.heuristic import claim_parts

    out = []
    for r in data_rows:
        claim = claim_without_markers(r["claim"])
        f = pair_facts(r["passage"], claim)
        out.append(
            not f.thin and f.features[0] < NO_COVERAGE_BELOW and len(claim_parts(claim).content) >= NO_MIN_CONTENT_WORDS
        )
    return np.array(out)


def nested_cv(data: Tuning, seed: int) -> np.ndarray:
    """The screen's yes/not-yes on every tuning pair, each from a model and threshold chosen without its fold."""
    idx = np.arange(len(data.label))
    folds = lexical_training.folds_of(data.groups, FOLDS, seed)
    passed = np.zeros(len(idx), dtype=bool)
    for k in range(FOLDS):
        train, test = idx[folds != k], idx[folds == k]
        t = choose_threshold(data, train, seed + 1)
        passed[test] = scores(fit_yes(data, train), data, test) >= t
    return passed


def figures(verdicts: np.ndarray, label: np.ndarray) -> dict:
    """Counts and 95% Wilson intervals: false pass on no+partial and on no, recall, `no`'s false fail."""
    neg, no, pos = label != "yes", label == "no", label == "yes"
    yes, said_no = verdicts == "yes", verdicts == "no"

    def rate(k: int, n: int) -> dict:
        low, high = wilson_interval(k, n)
        return {"k": k, "n": n, "rate": k / n if n else None, "low": low, "high": high}

    return {
        "pairs": len(label),
        "false_pass": rate(int(yes[neg].sum()), int(neg.sum())),
        "false_pass_no": rate(int(yes[no].sum()), int(no.sum())),
        "recall": rate(int(yes[pos].sum()), int(pos.sum())),
        "false_fail": rate(int(said_no[pos].sum()), int(pos.sum())),
        "undecided": rate(int((verdicts == "undecided").sum()), len(label)),
    }


def cell(r: dict) -> str:
    if not r["n"]:
        return "-"
    return f"{r['k']}/{r['n']} = {100 * r['rate']:.1f}% [{100 * r['low']:.1f}, {100 * r['high']:.1f}]"


def table_row(name: str, f: dict) -> str:
    return (
        f"| {name} | {f['pairs']} | {cell(f['false_pass'])} | {cell(f['false_pass_no'])} | {cell(f['recall'])} | "
        f"{cell(f['false_fail'])} |"
    )


TABLE_HEAD = (
    "| labels | pairs | false pass: yes on human no+partial | yes on human no | recall: yes on human yes | "
    "false fail: no on human yes |\n|---|---|---|---|---|---|"
)


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_verdicts(path: Path, weights: ScreenWeights) -> tuple[np.ndarray, np.ndarray]:
    rows = load(path)
    verdicts = np.array([screen_verdict(r["passage"], r["claim"], weights) for r in rows])
    return verdicts, np.array([r["label"] for r in rows])


def train(data: Tuning) -> dict:
    idx = np.arange(len(data.label))
    (mean, scale, coef), (base, trees) = fit_yes(data, idx)
    rounded = lexical_training.rounded
    return {
        "model": SCREEN_MODEL,
        "trained_on": {name: str(path.relative_to(PROJECT)) for name, path in TUNE.items()},
        "pairs": len(idx),
        "fitted_pairs": int(data.allowed.sum()),
        "demo_weight": DEMO_WEIGHT,
        "seed": SEED,
        "l2": lexical_training.L2,
        "trees": {
            "count": lexical_training.TREES,
            "rate": lexical_training.RATE,
            "depth": lexical_training.DEPTH,
            "bins": lexical_training.BINS,
            "min_leaf": lexical_training.MIN_LEAF,
            "l2": lexical_training.TREE_L2,
        },
        "target_false_pass": TARGET_FALSE_PASS,
        "features": list(FEATURE_NAMES),
        "mean": rounded(mean),
        "scale": rounded(scale),
        "yes": {
            "coef": rounded(coef),
            "threshold": rounded([choose_threshold(data, idx, SEED)])[0],
            "trees_base": rounded([base])[0],
            "trees": [lexical_training.rounded_tree(t) for t in trees],
        },
        "no": {"coverage_below": NO_COVERAGE_BELOW, "min_content_words": NO_MIN_CONTENT_WORDS},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped weights instead of writing")
    args = ap.parse_args(argv)
    missing = [str(p.relative_to(PROJECT)) for p in TUNE.values() if not p.exists()]
    if missing:
        print(f"missing tuning labels: {', '.join(missing)}; run scripts/convert_labels.py first", file=sys.stderr)
        return 2
    tuning_rows = {name: load(path) for name, path in TUNE.items()}
    data = Tuning([(name, r) for name, rows in tuning_rows.items() for r in rows])
    weights = train(data)
    text = json.dumps(weights, indent=1) + "\n"
    if args.check:
        same = WEIGHTS_PATH.exists() and WEIGHTS_PATH.read_text(encoding="utf-8") == text
        print(f"{WEIGHTS_PATH.relative_to(PROJECT)}: {'up to date' if same else 'DIFFERS from a fresh training'}")
        return 0 if same else 1
    WEIGHTS_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {WEIGHTS_PATH.relative_to(PROJECT)} (yes threshold {weights['yes']['threshold']} log-odds)")

    passed = nested_cv(data, SEED)
    said_no = np.concatenate([no_rule(rows) for rows in tuning_rows.values()])
    cv_verdicts = np.where(passed, "yes", np.where(said_no, "no", "undecided"))
    print(f"\n{SCREEN_MODEL}; tuning splits {FOLDS}-fold cross-validated (nested, seed {SEED}); test splits held out:")
    print(TABLE_HEAD)
    for name in TUNE:
        m = data.dataset == name
        print(table_row(f"{name} (tuning, CV)", figures(cv_verdicts[m], data.label[m])))
    shipped = ScreenWeights.from_dict(weights)
    for name, path in TEST.items():
        if path.exists():
            print(table_row(f"{name} (held out)", figures(*test_verdicts(path, shipped))))
        else:
            print(f"| {name} | not converted: run scripts/convert_labels.py |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
