"""The support sample (docs/support-gate.md; SPEC section 5): high stakes → all, low → a stable hash sample, off →
none.

The sample key is 52 bits of sha256 over the citation id, computed in SQL for the whole day at once;
`sample_key` is the same function in Python, so anyone can recompute why a citation was picked.
"""

from __future__ import annotations

import hashlib
from datetime import date

import duckdb

from citegate_assets.lib.core.surfaces import SurfacePolicies
from citegate_assets.lib.storage.warehouse import run_script
from citegate_assets.lib.support.policies import registered_policies

SALT = "citegate-sample-v1:"


def sample_key(citation_id: str) -> float:
    return int(hashlib.sha256((SALT + citation_id).encode()).hexdigest()[:13], 16) / 2**52


def select_sample(con: duckdb.DuckDBPyConnection, start: date, end: date, config: SurfacePolicies) -> None:
    """Replace support_sample for [start, end) in the caller's transaction."""
    params = {"start": start, "end": end}
    with registered_policies(con, config, start, end):
        run_script(con, "support/delete_sample", params)
        run_script(con, "support/support_sample", {**params, "salt": SALT})
