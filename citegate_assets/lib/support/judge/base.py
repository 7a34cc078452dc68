"""What every judge takes and returns. A judge never raises for one bad pair: it returns `error`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol

VERDICTS = ("yes", "partial", "no")
FAILURES = ("unparseable", "error")  # never a pass; `error` is never cached
UNDECIDED = "undecided"  # the screen's word for a pair it leaves to the LLM judge (lib/support/judge/screen.py)
UNJUDGED = "unjudged"  # what the screen left undecided with no LLM judge configured: never a pass, never cached


@dataclass(frozen=True)
class JudgeRequest:
    key: str  # the cache key of (judge model, template version, passage, claim)
    passage: str  # the cited chunk's text as it reached the prompt (normalized)
    claim: str  # the claim sentence (normalized)


@dataclass
class JudgeResult:
    key: str
    verdict: str  # yes | partial | no | unparseable | error; the screen: yes | no | undecided | error
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


def verdict_piece(
    verdict_of: Callable[[str, str], str], pairs: Sequence[tuple[str, str]]
) -> list[tuple[str, str | None, float]]:
    """(verdict, error text or None, latency ms) per pair; a pair that raises is an error, the others are judged."""
    # imported here: the tokenizer's users (the guard) need no polars
    from citegate_assets.lib.core.processes import collector_paused

    out: list[tuple[str, str | None, float]] = []
    with collector_paused():
        for passage, claim in pairs:
            started = time.perf_counter()
            try:
                verdict, error = verdict_of(passage, claim), None
            except Exception as exc:  # a judge never raises for one bad pair
                verdict, error = "error", f"{type(exc).__name__}: {exc}"
            out.append((verdict, error, (time.perf_counter() - started) * 1000.0))
    return out


def judge_in_process(
    requests: list[JudgeRequest],
    verdict_of: Callable[[str, str], str],
    progress: Progress | None = None,
    workers: int = 1,
) -> list[JudgeResult]:
    """An offline judge's pass over the pairs: verdict_of(passage, claim) per pair, timed; a pair that raises is
    an `error` verdict (never a pass), and the others are still judged. workers > 1: a large pass is split across
    that many spawned processes (lib/core/processes.py; verdict_of must pickle), with the same results in order."""
    from citegate_assets.lib.core.processes import collector_paused, map_pieces

    total = len(requests)
    pairs = [(req.passage, req.claim) for req in requests]
    report = (lambda done: progress(done, total)) if progress is not None else None
    scored = map_pieces(partial(verdict_piece, verdict_of), pairs, workers, report)
    if scored is None:
        scored = []
        with collector_paused():
            for pair in pairs:
                scored.extend(verdict_piece(verdict_of, [pair]))
                if report is not None:
                    report(len(scored))
    return [
        JudgeResult(key=req.key, verdict=verdict, raw_answer=error or verdict, latency_ms=latency_ms)
        for req, (verdict, error, latency_ms) in zip(requests, scored, strict=True)
    ]
