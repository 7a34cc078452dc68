"""What every judge takes and returns. A judge never raises for one bad pair: it returns `error`."""

from __future__ import annotations

import time
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


def judge_in_process(
    requests: list[JudgeRequest], verdict_of: Callable[[str, str], str], progress: Progress | None = None
) -> list[JudgeResult]:
    """An offline judge's pass over the pairs: verdict_of(passage, claim) per pair, timed; a pair that raises is
    an `error` verdict (never a pass), and the others are still judged."""
    results: list[JudgeResult] = []
    total = len(requests)
    for i, req in enumerate(requests, 1):
        started = time.perf_counter()
        try:
            verdict = verdict_of(req.passage, req.claim)
            result = JudgeResult(key=req.key, verdict=verdict, raw_answer=verdict)
        except Exception as exc:  # a judge never raises for one bad pair
            result = JudgeResult(key=req.key, verdict="error", raw_answer=f"{type(exc).__name__}: {exc}")
        result.latency_ms = (time.perf_counter() - started) * 1000.0
        results.append(result)
        if progress is not None:
            progress(i, total)
    return results
