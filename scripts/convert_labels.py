"""Convert public hand-labelled attribution data into citegate's label shape, one (claim, passage) pair a line.

Every output row: id, claim, passage, label (`yes`, `partial` or `no`), labeller; the AttributionBench rows also
carry source (the data set the pair came from). Each split has a role, and the screen is never tuned on a test
split (scripts/train_screen.py reads only the train/tune ones):

| output | role | source (repository @ commit: file) |
|---|---|---|
| labels/wice/dev-labels.jsonl | train/tune | ryokamoi/wice @ WICE_COMMIT: oracle_chunks/claim/dev.jsonl |
| labels/wice/test-labels.jsonl | test | ryokamoi/wice @ WICE_COMMIT: oracle_chunks/claim/test.jsonl |
| labels/attributionbench/dev-labels.jsonl | tune | AttributionBench @ AB_COMMIT: data/dev_all_subset_balanced.jsonl |
| labels/attributionbench/test-labels.jsonl | test | ... data/test_all_subset_balanced_sampled500.jsonl |
| labels/attributionbench/test-ood-labels.jsonl | test | ... data/test_ood_all_subset_balanced.jsonl |

WiCE ("Real-World Entailment for Claims in Wikipedia", Kamoi et al., EMNLP 2023), the oracle retrieval data:
the passage is the chunk's sentences joined by one space; supported -> yes, partially_supported -> partial,
not_supported -> no; ids wice-{split}{claim id}-{k}, k the chunk's place among the claim's rows. Annotations
ODC-BY 1.0, text CC-BY-SA and the Common Crawl terms (labels/wice/LICENSE.md).

AttributionBench (repository OSU-NLP-Group/AttributionBench; Li et al., 2024; Apache-2.0 on its data set card):
claims written by generative search engines
and LLMs (ExpertQA, Stanford-GenSearch, LFQA, AttributedQA in dev and test; HAGRID, BEGIN, AttrScore-GenSearch in
the out-of-domain test) with the references they cited, labelled by annotators and domain experts: attributable ->
yes, not attributable -> no (it has no partial). The passage is the references joined by one space.

The sources are read from local git copies of the two repositories (bare or not), at the pinned commits:

    .venv/bin/python scripts/convert_labels.py --wice GIT_DIR --attributionbench GIT_DIR
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
WICE_COMMIT = "ddeb6c183665e2a20c5f03c5aa07f03888b9870f"
AB_COMMIT = "b33329b29946b791649cf66d33e10b5a5bbdc44d"
WICE_DIR = "code_and_resources/entailment_inputs/oracle_chunks/claim"
WICE_LABELS = {"supported": "yes", "partially_supported": "partial", "not_supported": "no"}
AB_LABELS = {"attributable": "yes", "not attributable": "no"}

# output path -> (source, role, file in the source repository)
SPLITS = {
    "labels/wice/dev-labels.jsonl": ("wice", "train/tune", f"{WICE_DIR}/dev.jsonl"),
    "labels/wice/test-labels.jsonl": ("wice", "test", f"{WICE_DIR}/test.jsonl"),
    "labels/attributionbench/dev-labels.jsonl": ("attributionbench", "tune", "data/dev_all_subset_balanced.jsonl"),
    "labels/attributionbench/test-labels.jsonl": (
        "attributionbench",
        "test",
        "data/test_all_subset_balanced_sampled500.jsonl",
    ),
    "labels/attributionbench/test-ood-labels.jsonl": (
        "attributionbench",
        "test",
        "data/test_ood_all_subset_balanced.jsonl",
    ),
}
COMMITS = {"wice": WICE_COMMIT, "attributionbench": AB_COMMIT}
DEFAULT_GIT = {
    "wice": Path("/work/.mirror/ryokamoi+wice/repo"),
    "attributionbench": Path("/work/.mirror/OSU-NLP-Group+AttributionBench/repo"),
}


def source_lines(git_dir: Path, commit: str, path: str) -> list[str]:
    """The file's lines at the pinned commit; a clear error naming the repository, commit and file otherwise."""
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{git_dir}: cannot read {commit}:{path}: {done.stderr.strip()}")
    return [line for line in done.stdout.splitlines() if line.strip()]


def wice_rows(lines: list[str], split: str, path: str) -> Iterator[dict]:
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        raw = json.loads(line)
        label = WICE_LABELS.get(raw["label"])
        if label is None:
            raise SystemExit(f"{path}:{number}: label {raw['label']!r} is not one of {sorted(WICE_LABELS)}")
        claim_id = raw["meta"]["id"]
        k = seen.get(claim_id, 0)
        seen[claim_id] = k + 1
        yield {
            "id": f"wice-{claim_id}-{k}" if claim_id.startswith(split) else f"wice-{split}{claim_id}-{k}",
            "claim": raw["claim"],
            "passage": " ".join(raw["evidence"]),
            "label": label,
            "labeller": "wice-annotators",
        }


def attributionbench_rows(lines: list[str], path: str) -> Iterator[dict]:
    for number, line in enumerate(lines, 1):
        raw = json.loads(line)
        label = AB_LABELS.get(raw["attribution_label"])
        if label is None:
            raise SystemExit(f"{path}:{number}: attribution_label {raw['attribution_label']!r} is not known")
        yield {
            "id": f"ab-{raw['id']}",
            "claim": raw["claim"].strip(),
            "passage": " ".join(ref.strip() for ref in raw["references"] if ref and ref.strip()),
            "label": label,
            "labeller": f"attributionbench:{raw['src_dataset']}",
            "source": raw["src_dataset"],
        }


def convert(output: str, git_dirs: dict[str, Path], into: Path = PROJECT) -> Path:
    """Write one split (a key of SPLITS) under `into`; the path written."""
    source, _role, path = SPLITS[output]
    lines = source_lines(git_dirs[source], COMMITS[source], path)
    if source == "wice":
        rows = list(wice_rows(lines, "test" if path.endswith("test.jsonl") else "dev", path))
    else:
        rows = list(attributionbench_rows(lines, path))
    target = into / output
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wice", type=Path, default=DEFAULT_GIT["wice"], help="git directory of ryokamoi/wice")
    ap.add_argument(
        "--attributionbench",
        type=Path,
        default=DEFAULT_GIT["attributionbench"],
        help="git directory of OSU-NLP-Group/AttributionBench",
    )
    ap.add_argument("--only", choices=sorted(SPLITS), action="append", help="convert just this output (repeatable)")
    args = ap.parse_args(argv)
    git_dirs = {"wice": args.wice, "attributionbench": args.attributionbench}
    for output in args.only or SPLITS:
        target = convert(output, git_dirs)
        count = sum(1 for _ in target.open(encoding="utf-8"))
        print(f"{output}: {count} pairs ({SPLITS[output][1]})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
