"""The demo's hand labels, drawn from its own generated logs: the judge is calibrated on citations like the ones it
judges, instead of on labels/demo-labels.jsonl (hand-written pairs the offline judge passes far more often).

Only citations built to pass provenance (reason `ok`) are candidates: the others never reach the judge. Each
label's passage is the cited chunk's body as the prompt carries it (an `ok` citation's chunk is rendered whole),
its claim the answer's claim, and its label the generator's truth: `faithful` is `yes`; `overreach` (the faithful
claim plus an assertion the passage lacks), `numeric_mismatch` and `unrelated` are `no`. The generator has no
other case; `overreach` is what a human might call `partial`, and calibration counts partial and no alike (not
supported), so the choice changes no figure. The sample is seeded and balanced: half yes, half no (each drawn at
random, so surfaces and kinds come as often as in the logs), because both error rates are conditional on the
human label and are measured with the same precision that way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from random import Random
from typing import Any

from citegate_assets.lib.loggen.citations import Cite

LABELLER = "citegate-loggen-truth"
LABEL_OF_KIND = {"faithful": "yes", "overreach": "no", "numeric_mismatch": "no", "unrelated": "no"}
DEFAULT_COUNT = 300


@dataclass(frozen=True)
class Candidate:
    """One generated citation the judge will see, with its truth."""

    citation_id: str
    surface: str
    claim_kind: str
    claim: str
    passage: str


def candidates(record: dict[str, Any], cites: Iterable[Cite]) -> list[Candidate]:
    """The citations of one generated record that pass provenance, each with the passage the prompt carries."""
    text = {chunk["chunk_id"]: chunk["text"] for chunk in record["retrieved"]}
    return [
        Candidate(f"{record['request_id']}#{pos}", record["surface"], cite.claim_kind, cite.claim, text[cite.chunk_id])
        for pos, cite in enumerate(cites)
        if cite.reason == "ok"
    ]


def sample_labels(pool: list[Candidate], count: int, seed: int) -> list[dict[str, str]]:
    """A seeded sample of `count` candidates, half yes and half no (the other side fills a short one), as
    hand-label rows (id, claim, passage, label, labeller; citation_id, surface and claim_kind to trace them)."""
    rng = Random(f"citegate:{seed}:demo-labels")
    yes = [c for c in pool if LABEL_OF_KIND[c.claim_kind] == "yes"]
    no = [c for c in pool if LABEL_OF_KIND[c.claim_kind] == "no"]
    want_no = min(len(no), max(count // 2, count - len(yes)))
    want_yes = min(len(yes), count - want_no)
    chosen = rng.sample(yes, want_yes) + rng.sample(no, want_no)
    return [
        {
            "id": f"demo-{c.citation_id}",
            "claim": c.claim,
            "passage": c.passage,
            "label": LABEL_OF_KIND[c.claim_kind],
            "labeller": LABELLER,
            **{k: v for k, v in asdict(c).items() if k in ("citation_id", "surface", "claim_kind")},
        }
        for c in sorted(chosen, key=lambda c: c.citation_id)
    ]


def write_labels(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
