"""The LLM judge: one (passage, claim) pair per chat-completions request to any OpenAI-compatible endpoint.

Retries, backoff, Retry-After, concurrency and the circuit breaker are ours (the SDK's own retries are
off), so every attempt is counted and testable. Nothing here raises for one bad pair: a reply that does
not parse is `unparseable` (text kept), a transport failure after the retries is `error` (raw_answer
says what went wrong: status, error type, the server's message truncated — never a key or a header: every text
is masked with lib/support/judge/secrets.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import http
import json
import logging
import math
import random
import time
import traceback
from dataclasses import dataclass, field

import openai
from openai.types.chat import ChatCompletion

from citegate_assets.lib.support.judge.base import JudgeRequest, JudgeResult, Progress
from citegate_assets.lib.support.judge.parse import parse_reply, whole_reply
from citegate_assets.lib.support.judge.prompt import render_prompt
from citegate_assets.lib.support.judge.secrets import NO_KEY, SecretMask, url_secrets

log = logging.getLogger(__name__)

MESSAGE_LIMIT = 300  # characters of the server's message kept in raw_answer


@dataclass(frozen=True)
class JudgeSettings:
    base_url: str
    model: str
    api_key: str = field(default=NO_KEY, repr=False)  # already resolved from the environment by the caller
    # other secrets masked in what the judge answers: every configured key's value (lib/support/judge/secrets.py)
    masked: tuple[str, ...] = field(default=(), repr=False)
    concurrency: int = 8  # max requests in flight
    timeout_s: float = 30.0  # per call
    max_tokens: int = 5
    max_retries: int = 5  # retries after the first attempt, on 429, 5xx, timeouts, connection errors, bad bodies
    backoff_base_s: float = 0.5  # full jitter: uniform(0, min(max, base * 2**attempt))
    backoff_max_s: float = 30.0
    breaker_threshold: int = 10  # this many consecutive pairs failing after all retries opens the circuit

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError("judge base_url must start with http:// or https://")
        if not self.model:
            raise ValueError("judge model must not be empty")
        for name in ("concurrency", "max_tokens", "breaker_threshold"):
            if getattr(self, name) < 1:
                raise ValueError(f"judge {name} must be >= 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise ValueError(f"judge max_retries must be >= 0, got {self.max_retries}")
        for name in ("timeout_s", "backoff_max_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"judge {name} must be > 0, got {getattr(self, name)}")
        if not self.backoff_base_s >= 0:
            raise ValueError(f"judge backoff_base_s must be >= 0, got {self.backoff_base_s}")


# ---------------------------------------------------------------------------------------------------
# One attempt's outcome


@dataclass
class _Success:
    text: str | None
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass
class _Failure:
    head: str  # "429 Too Many Requests", "timeout", "connection error", "malformed response", ...
    detail: str  # already scrubbed and truncated
    retriable: bool
    retry_after: float | None = None  # seconds the server asked us to wait

    def describe(self, attempts: int | None = None) -> str:
        text = self.head
        if attempts is not None:
            text += f" after {attempts} attempt{'s' if attempts != 1 else ''}"
        return f"{text}: {self.detail}" if self.detail else text


class _Breaker:
    """Consecutive pairs that ended in a retriable-kind `error`; open at the threshold, reset by a success."""

    def __init__(self, threshold: int):
        self.threshold = threshold
        self.consecutive = 0

    @property
    def open(self) -> bool:
        return self.consecutive >= self.threshold

    def success(self) -> None:
        self.consecutive = 0

    def failure(self) -> None:
        self.consecutive += 1
        if self.consecutive == self.threshold:
            log.warning("judge circuit open after %d consecutive failed pairs", self.consecutive)

    def message(self) -> str:
        return f"circuit open: {self.consecutive} consecutive failures"


# ---------------------------------------------------------------------------------------------------


class OpenAIJudge:
    def __init__(self, settings: JudgeSettings, *, seed: int | None = None):
        self.settings = settings
        self.model = settings.model
        self._rng = random.Random(seed)  # backoff jitter only
        self.secret_mask = secret_mask(settings)

    def __repr__(self) -> str:
        return f"OpenAIJudge(model={self.model!r})"

    # -- public, synchronous -----------------------------------------------------------------------

    def judge(self, requests: list[JudgeRequest], progress: Progress | None = None) -> list[JudgeResult]:
        """One result per request, in request order. Runs its own event loop in a worker thread, so it
        may be called from inside a running loop (which it blocks until done)."""
        requests = list(requests)
        if not requests:
            return []
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="citegate-judge") as pool:
            return pool.submit(asyncio.run, self._run(requests, progress)).result()

    # -- async core --------------------------------------------------------------------------------

    async def _run(self, requests: list[JudgeRequest], progress: Progress | None) -> list[JudgeResult]:
        s = self.settings
        total = len(requests)
        results: list[JudgeResult | None] = [None] * total
        done = 0
        try:
            client = openai.AsyncOpenAI(base_url=s.base_url, api_key=s.api_key, max_retries=0, timeout=s.timeout_s)
        except Exception as exc:  # a setup failure is every pair's `error`, not an exception for the caller
            reason = self._cut(f"judge client setup failed: {_exc_text(exc)}")
            return [JudgeResult(key=r.key, verdict="error", raw_answer=reason, attempts=0) for r in requests]

        breaker = _Breaker(s.breaker_threshold)
        semaphore = asyncio.Semaphore(s.concurrency)
        progress_broken = False

        async def one(index: int, request: JudgeRequest) -> None:
            nonlocal done, progress_broken
            async with semaphore:  # FIFO: pairs start in request order
                if breaker.open:
                    result = JudgeResult(key=request.key, verdict="error", raw_answer=breaker.message(), attempts=0)
                else:
                    try:
                        result = await self._judge_pair(client, request, breaker)
                    except Exception as exc:  # a bug or a bad request object: this pair's `error`, not the run's
                        trace = self.secret_mask("".join(traceback.format_exception(exc)))
                        log.error("judge pair %s failed unexpectedly: %s", request.key, trace)
                        reason = self._cut(f"unexpected error: {_exc_text(exc)}")
                        result = JudgeResult(key=request.key, verdict="error", raw_answer=reason, attempts=0)
            results[index] = result
            done += 1
            if progress is not None and not progress_broken:
                try:
                    progress(done, total)
                except Exception:  # a broken progress bar must not lose the run
                    progress_broken = True
                    log.exception("judge progress callback failed; no further progress reports")

        try:
            await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
        finally:
            await client.close()
        return [r for r in results if r is not None]

    async def _judge_pair(self, client: openai.AsyncOpenAI, request: JudgeRequest, breaker: _Breaker) -> JudgeResult:
        s = self.settings
        prompt = render_prompt(request.passage, request.claim)
        attempts = 0
        while True:
            attempts += 1
            started = time.monotonic()
            outcome = await self._attempt(client, prompt)
            if isinstance(outcome, _Success):
                breaker.success()
                return JudgeResult(
                    key=request.key,
                    verdict=parse_reply(outcome.text),
                    raw_answer=outcome.text,
                    prompt_tokens=outcome.prompt_tokens,
                    completion_tokens=outcome.completion_tokens,
                    latency_ms=(time.monotonic() - started) * 1000.0,
                    attempts=attempts,
                )
            if not outcome.retriable:  # 400, 401, 404, ...: the request itself is wrong; retrying won't help
                breaker.failure()  # a wrong key or model fails every pair: stop at the threshold, not after 100k calls
                return JudgeResult(key=request.key, verdict="error", raw_answer=outcome.describe(), attempts=attempts)
            if attempts > s.max_retries:
                breaker.failure()
                return JudgeResult(
                    key=request.key, verdict="error", raw_answer=outcome.describe(attempts), attempts=attempts
                )
            await asyncio.sleep(self._backoff(attempts - 1, outcome.retry_after))
            if breaker.open:  # other pairs have given up on the endpoint meanwhile: stop retrying this one
                return JudgeResult(key=request.key, verdict="error", raw_answer=breaker.message(), attempts=attempts)

    async def _attempt(self, client: openai.AsyncOpenAI, prompt: str) -> _Success | _Failure:
        s = self.settings
        try:
            async with asyncio.timeout(s.timeout_s):  # a whole-call deadline; the SDK's timeout is per read
                completion = await client.chat.completions.create(
                    model=s.model,
                    messages=[{"role": "user", "content": prompt}],
                    temperature=0,
                    max_tokens=s.max_tokens,
                )
        except openai.APITimeoutError as exc:
            return self._timeout(exc.__cause__)
        except TimeoutError as exc:
            return self._timeout(exc)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            return _Failure("connection error", self._cut(_exc_text(cause)), retriable=True)
        except openai.APIStatusError as exc:
            return self._status_failure(exc)
        except openai.APIResponseValidationError as exc:
            return _Failure("malformed response", self._cut(f"{exc.status_code}: {exc.message}"), retriable=True)
        except json.JSONDecodeError:
            return _Failure("malformed response", "body is not valid JSON", retriable=True)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            return _Failure("malformed response", self._cut(_exc_text(exc)), retriable=True)
        except Exception as exc:  # never raise for one pair
            return _Failure("unexpected error", self._cut(_exc_text(exc)), retriable=False)
        return self._read_completion(completion)

    # -- helpers -----------------------------------------------------------------------------------

    def _read_completion(self, completion: object) -> _Success | _Failure:
        """The SDK constructs models without validating them; a 200 that is not a chat completion is a
        transport failure (retried), not an answer."""
        if not isinstance(completion, ChatCompletion):
            shown = completion if isinstance(completion, str) else type(completion).__name__
            return _Failure("malformed response", self._cut(f"not a chat completion: {shown!r}"), retriable=True)
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list) or not choices:
            return _Failure("malformed response", "no choices", retriable=True)
        message = getattr(choices[0], "message", None)
        if message is None or not hasattr(message, "content"):
            return _Failure("malformed response", "choices[0] has no message", retriable=True)
        text = message.content
        if text is not None and not isinstance(text, str):
            return _Failure("malformed response", "message content is not text", retriable=True)
        usage = getattr(completion, "usage", None)
        return _Success(
            text=whole_reply(text, _reasoning_of(message)),
            prompt_tokens=_int_or_none(getattr(usage, "prompt_tokens", None)),
            completion_tokens=_int_or_none(getattr(usage, "completion_tokens", None)),
        )

    def _timeout(self, cause: BaseException | None) -> _Failure:
        kind = type(cause).__name__ if cause is not None else "timeout"
        return _Failure("timeout", f"no response within {self.settings.timeout_s:g} s ({kind})", retriable=True)

    def _status_failure(self, exc: openai.APIStatusError) -> _Failure:
        status = exc.status_code
        try:
            head = f"{status} {http.HTTPStatus(status).phrase}"
        except ValueError:
            head = f"HTTP {status}"
        body = exc.body
        message, error_type = None, None
        if isinstance(body, dict):
            error = body.get("error", body)
            if isinstance(error, dict):
                message = error.get("message")
                error_type = error.get("type")
            elif isinstance(error, str):
                message = error
        elif isinstance(body, str):
            message = body
        parts = [self._cut(str(error_type), 60)] if error_type else []
        if message:
            parts.append(self._cut(str(message)))
        detail = ": ".join(parts)  # e.g. "rate_limit_error: Rate limit reached for ..."
        retriable = status == 429 or status >= 500
        retry_after = _retry_after(exc.response.headers) if retriable else None
        return _Failure(head, detail, retriable=retriable, retry_after=retry_after)

    def _backoff(self, retry_index: int, retry_after: float | None) -> float:
        s = self.settings
        ceiling = min(s.backoff_max_s, s.backoff_base_s * 2.0 ** min(retry_index, 62))
        delay = self._rng.uniform(0.0, ceiling)
        if retry_after is not None:
            delay = max(delay, retry_after)  # at least what the server asked for
        return min(delay, s.backoff_max_s)

    def _cut(self, text: str, limit: int = MESSAGE_LIMIT) -> str:
        return cut(self.secret_mask, text, limit)


def cut(mask: SecretMask, text: str, limit: int = MESSAGE_LIMIT) -> str:
    """An error text as reported: whitespace collapsed, secrets masked (before cutting, so no part of one is left),
    at most `limit` characters."""
    text = mask(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def secret_mask(settings: JudgeSettings) -> SecretMask:
    """What must never appear in what the judge reports: its key, any credentials in its base URL, and the other
    configured secrets (settings.masked)."""
    return SecretMask([settings.api_key, *url_secrets(settings.base_url), *settings.masked])


def _retry_after(headers) -> float | None:
    """retry-after-ms, then Retry-After (seconds or an HTTP date); None when absent or nonsense."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            seconds = float(value) / 1000.0
            if math.isfinite(seconds) and seconds >= 0:
                return seconds
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.mktime_tz(email.utils.parsedate_tz(value)) - time.time()
        except (TypeError, ValueError, OverflowError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _exc_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _reasoning_of(message: object) -> str | None:
    """A reasoning model's separate reasoning field: `reasoning_content` (vLLM before 0.11, llama.cpp) or `reasoning`
    (vLLM from 0.11, Ollama); None when absent or not text."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
