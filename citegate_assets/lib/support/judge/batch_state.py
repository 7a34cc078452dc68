"""What a run records of a Batch API batch, without the openai client (lib/support/judge/batch.py): the retention and
automation rules and the support stage's bookkeeping read these, and loading the definitions should not import
openai (about a second per process)."""

from __future__ import annotations

from dataclasses import dataclass

# the provider will not change these any more; not_found: our own status for a batch the provider answers 404 for
TERMINAL = ("completed", "failed", "expired", "cancelled", "not_found")
PENDING_PREFIX = "batch pending"  # raw_answer of a pair whose batch is still open at the run's deadline


@dataclass
class BatchState:
    """What the provider last said about one batch."""

    batch_id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    detail: str | None = None  # the provider's errors, or why we could not ask

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class BatchSubmitError(RuntimeError):
    """The batch could not be created: its pairs are `error` this run and submitted again on the next."""


def pending_answer(state: BatchState) -> str:
    """raw_answer of a pair whose batch is still open at the deadline: `error`, judged on a later run."""
    return f"{PENDING_PREFIX}: {state.batch_id} is {state.status}; the next run collects it"
