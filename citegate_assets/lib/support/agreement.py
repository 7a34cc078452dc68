"""Agreement between the primary judge and a candidate ([judge.secondary]): the sample, the confusion table and
Cohen's kappa over yes / partial / no.

A pair the secondary could not judge (`error`, `unparseable`) is counted apart and is in neither the table nor
kappa: a failure is never agreement. Kappa is (p_o - p_e) / (1 - p_e), with p_o the share of pairs on the
diagonal and p_e the agreement expected by chance from the two judges' marginals; it is None with no compared
pair, or when p_e = 1 (both judges gave one and the same verdict to every pair: kappa is undefined).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from citegate_assets.lib.support.judge.base import VERDICTS

SALT = "citegate-agreement-v1:"  # not the support sample's salt: the two samples are independent


def agreement_key(citation_id: str) -> float:
    """Uniform in [0, 1), stable: the pair goes to the secondary when this is under sample_rate
    (sql/support/agreement_pairs.sql computes the same in SQL)."""
    return int(hashlib.sha256((SALT + citation_id).encode()).hexdigest()[:13], 16) / 2**52


@dataclass(frozen=True)
class Agreement:
    confusion: dict[tuple[str, str], int]  # (primary, secondary) -> pairs, over VERDICTS x VERDICTS
    compared: int  # pairs where both judges answered yes, partial or no
    agreed: int  # ... and gave the same verdict
    secondary_failures: int  # the secondary's error / unparseable: counted apart, never agreement
    kappa: float | None

    @property
    def observed(self) -> float | None:
        return self.agreed / self.compared if self.compared else None


def cohen_kappa(confusion: dict[tuple[str, str], int], labels: tuple[str, ...] = VERDICTS) -> float | None:
    n = sum(confusion.get((a, b), 0) for a in labels for b in labels)
    if n == 0:
        return None
    p_o = sum(confusion.get((a, a), 0) for a in labels) / n
    rows = {a: sum(confusion.get((a, b), 0) for b in labels) / n for a in labels}
    cols = {b: sum(confusion.get((a, b), 0) for a in labels) / n for b in labels}
    p_e = sum(rows[k] * cols[k] for k in labels)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def agreement(pairs: Iterable[tuple[str, str]]) -> Agreement:
    """pairs: (primary verdict, secondary verdict)."""
    confusion = {(a, b): 0 for a in VERDICTS for b in VERDICTS}
    failures = 0
    for primary, secondary in pairs:
        if primary in VERDICTS and secondary in VERDICTS:
            confusion[(primary, secondary)] += 1
        else:
            failures += 1
    compared = sum(confusion.values())
    agreed = sum(confusion[(v, v)] for v in VERDICTS)
    return Agreement(confusion, compared, agreed, failures, cohen_kappa(confusion))


def confusion_rows(result: Agreement) -> list[dict[str, object]]:
    """The table as rows: primary verdict, then one column per secondary verdict."""
    return [{"primary \\ secondary": a, **{b: result.confusion[(a, b)] for b in VERDICTS}} for a in VERDICTS]
