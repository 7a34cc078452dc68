"""The reason codes of the gates, in one place (docs/provenance-gate.md, "The review queue")."""

from __future__ import annotations

# What a citation's model or prompt assembly got wrong, in the gate's precedence, highest first
# (sql/provenance/provenance_results.sql); these are what a test generator plants.
ASSEMBLY_FAILURES = (
    "fabricated_id",
    "dropped_before_prompt",
    "span_truncated",
    "span_missing",
    "span_outside_context",
    "span_in_other_chunk",
)
# Not the model's fault, and never a pass: the log is not what the provider read (a native citation whose text is
# not at its location), or the prompt has no context block to check against.
UNVERIFIABLE = ("location_mismatch", "context_not_found")
PROVENANCE_FAILURES = UNVERIFIABLE + ASSEMBLY_FAILURES
SUPPORT_FAILURES = ("support_partial", "support_no", "judge_unparseable", "numeric_mismatch")
# Not a failure found, and never a pass: the screen left the citation undecided and no LLM judge is configured
SUPPORT_UNJUDGED = "support_unjudged"
# A queue entry has one reason (docs/decisions.md, "Review queue"); [queue].owners keys are these
QUEUE_REASONS = PROVENANCE_FAILURES + SUPPORT_FAILURES + (SUPPORT_UNJUDGED,)
