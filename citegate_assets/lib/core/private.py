"""Everything citegate writes holds prompt text (warehouse, its WAL, the published copy and its temporaries,
reviews, charts, Dagster's run storage, whose metadata quotes spans): private to its owner by default."""

from __future__ import annotations

import os

PRIVATE_UMASK = 0o077


def private_umask() -> int:
    """Make files and folders this process creates owner-only (keeping any stricter bits); returns the old umask."""
    old = os.umask(PRIVATE_UMASK)
    os.umask(old | PRIVATE_UMASK)
    return old
