"""What every judge takes and returns. A judge never raises for one bad pair: it returns `error`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

VERDICTS = ("yes", "partial", "no")
FAILURES = ("unparseable", "error")  # never a pass; `error` is never cached


@dataclass(frozen=True)
class JudgeRequest:
    key: str  # the cache key of (judge model, template version, passage, claim)
    passage: str  # the cited chunk's text as it reached the prompt (normalized)
    claim: str  # the claim sentence (normalized)


@dataclass
class JudgeResult:
    key: str
    verdict: str  # yes | partial | no | unparseable | error
    raw_answer: str | None  # the model's text as returned; for `error`, what went wrong
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    attempts: int = 1


Progress = Callable[[int, int], None]  # (done, total)


class Judge(Protocol):
    model: str  # recorded on every verdict and part of the cache key

    def judge(self, requests: list[JudgeRequest], progress: Progress | None = None) -> list[JudgeResult]:
        """One result per request, in the same order."""
        ...
