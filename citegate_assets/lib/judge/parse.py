"""Strict verdict parsing: yes / partial / no, tolerating only case, surrounding whitespace and one
trailing period. Anything else is `unparseable` — a failure, with the raw text kept."""

from __future__ import annotations

from .base import VERDICTS


def parse_verdict(raw: str | None) -> str:
    if raw is None:
        return "unparseable"
    text = raw.strip()
    if text.endswith("."):
        text = text[:-1]
    text = text.lower()
    return text if text in VERDICTS else "unparseable"
