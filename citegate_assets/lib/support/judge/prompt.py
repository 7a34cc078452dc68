"""The judge prompt: the seed's text word for word (template version v1), one passage, one claim."""

from __future__ import annotations

TEMPLATE_VERSION = "v1"

TEMPLATE_V1 = """You are checking one citation. You have no other information.

PASSAGE:
{passage_text}

CLAIM:
{claim_sentence}

Does the PASSAGE alone entail the CLAIM?
Answer with exactly one word: yes, partial, or no.
Do not explain. Do not use outside knowledge.
If the PASSAGE needs other context to support the CLAIM, answer no."""

_HEAD, _REST = TEMPLATE_V1.split("{passage_text}")
_MIDDLE, _TAIL = _REST.split("{claim_sentence}")


def render_prompt(passage: str, claim: str) -> str:
    """Concatenation, not str.format: a passage holding '{claim_sentence}' or braces stays inert."""
    return _HEAD + passage + _MIDDLE + claim + _TAIL
