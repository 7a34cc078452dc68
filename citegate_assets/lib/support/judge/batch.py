"""Batch judging: the run's uncached pairs as OpenAI Batch API jobs (files + batches endpoints), at the batch price.

The network side only; lib/support/judging.py records each batch in the warehouse between the calls made here (no DuckDB
connection is open while this module talks to the endpoint). A batch's request lines are exactly the online
judge's requests (the seed's prompt as one user message, temperature 0, `max_tokens`), one per pair, with the
pair's cache key as `custom_id`; its output lines go through the same strict parser. What is not a verdict is an
`error` (never a pass, never cached): a failed, expired or cancelled batch, a line missing from the output, a
line that is not JSON, a request the provider answered with an error, a body that is not a chat completion.

A batch carries a deterministic token in its `metadata` (a hash of the run's days, the judge model, the template
and the sorted pair keys). Before creating a batch the client lists the provider's batches (paged) and adopts an
open or completed one with the same token that the warehouse does not know yet: a run killed between the
provider's create and the warehouse's record pays for that batch once.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

import openai
from openai.types.chat import ChatCompletion

from citegate_assets.lib.support.judge.base import JudgeRequest, JudgeResult
from citegate_assets.lib.support.judge.batch_state import BatchState, BatchSubmitError
from citegate_assets.lib.support.judge.openai_judge import (
    MESSAGE_LIMIT,
    JudgeSettings,
    _exc_text,
    _reasoning_of,
    cut,
    secret_mask,
)
from citegate_assets.lib.support.judge.parse import parse_reply, whole_reply
from citegate_assets.lib.support.judge.prompt import TEMPLATE_VERSION, render_prompt

log = logging.getLogger(__name__)

ENDPOINT: Final = "/v1/chat/completions"
TOKEN_KEY = "citegate_token"  # the metadata key of a batch's deterministic token
# statuses of a batch worth adopting: it will be, or has been, answered (failed/expired/cancelled ones are not)
ADOPTABLE = ("validating", "in_progress", "finalizing", "completed")
ADOPT_WINDOW_S = 7 * 86400  # batches created longer ago than this are not looked at (the list is newest first)
LIST_PAGE = 100  # batches per list page (OpenAI's maximum)


@dataclass(frozen=True)
class BatchSettings:
    """[judge] batch_* keys (lib/config.py)."""

    wait_s: float = 3600.0  # poll until this many seconds after the run starts waiting, then leave the batch open
    poll_s: float = 5.0  # the first poll interval...
    poll_max_s: float = 300.0  # ...doubled after each poll up to this
    max_requests: int = 50000  # request lines per batch at most
    discount: float = 0.5  # share of the online price a batch call costs


class BatchClient:
    """files.create + batches.create to submit, batches.retrieve to poll, files.content to collect."""

    def __init__(
        self,
        settings: JudgeSettings,
        batch: BatchSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        recorded: Callable[[], Iterable[str]] | None = None,
    ):
        self.settings = settings
        self.batch = batch
        self.model = settings.model
        # the batch ids the warehouse already holds: never adopted again (a completed one was collected)
        self._recorded = recorded or (lambda: ())
        self.adopted: list[str] = []  # batches found by token instead of created, this client's life
        self._sleep = sleep
        self._clock = clock
        self.secret_mask = secret_mask(settings)
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=settings.api_key,
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,  # files and polls are safe to retry
        )

    def __repr__(self) -> str:
        return f"BatchClient(model={self.model!r})"

    def close(self) -> None:
        self._client.close()

    # -- submit ------------------------------------------------------------------------------------

    def request_line(self, request: JudgeRequest) -> dict:
        """One line of the input file: the online judge's request body for this pair."""
        return {
            "custom_id": request.key,
            "method": "POST",
            "url": ENDPOINT,
            "body": {
                "model": self.settings.model,
                "messages": [{"role": "user", "content": render_prompt(request.passage, request.claim)}],
                "temperature": 0,
                "max_tokens": self.settings.max_tokens,
            },
        }

    def token(self, requests: list[JudgeRequest], metadata: dict[str, str] | None = None) -> str:
        """The batch's deterministic token: the same days, judge, template and pairs give the same token."""
        identity = {
            "metadata": sorted((metadata or {}).items()),
            "model": self.model,
            "template": TEMPLATE_VERSION,
            "keys": sorted(r.key for r in requests),
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    def submit(self, requests: list[JudgeRequest], metadata: dict[str, str] | None = None) -> tuple[str, str, str]:
        """Adopt the unrecorded batch with this token, else upload the JSONL and create the batch:
        (batch_id, input_file_id, status). Raises BatchSubmitError."""
        token = self.token(requests, metadata)
        found = self.find(token)
        if found is not None:
            self.adopted.append(found[0])
            log.info("judge batch: adopted %s, created by an earlier run that did not record it", found[0])
            return found
        payload = b"".join(
            json.dumps(self.request_line(r), ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
            for r in requests
        )
        try:
            uploaded = self._client.files.create(
                file=(f"citegate-{uuid.uuid4().hex[:12]}.jsonl", io.BytesIO(payload), "application/jsonl"),
                purpose="batch",
            )
        except Exception as exc:
            raise BatchSubmitError(self._cut(f"upload failed: {_describe(exc)}")) from None
        try:
            # never retried by the SDK: a retry after a lost response could start (and bill) a second batch
            created = self._client.with_options(max_retries=0).batches.create(
                completion_window="24h",
                endpoint=ENDPOINT,
                input_file_id=uploaded.id,
                metadata={**(metadata or {}), TOKEN_KEY: token},
            )
        except Exception as exc:
            raise BatchSubmitError(self._cut(f"batch create failed: {_describe(exc)}")) from None
        return created.id, uploaded.id, str(created.status)

    def find(self, token: str) -> tuple[str, str, str] | None:
        """(batch_id, input_file_id, status) of the newest open or completed batch carrying `token` that the
        warehouse does not hold, from the provider's list (paged, newest first, back ADOPT_WINDOW_S). Raises
        BatchSubmitError when the list cannot be read: creating blind could pay twice, so this run does not."""
        known = set(self._recorded())
        oldest = time.time() - ADOPT_WINDOW_S
        try:
            for b in self._client.batches.list(limit=LIST_PAGE):
                if b.created_at < oldest:
                    return None
                metadata = b.metadata or {}
                if metadata.get(TOKEN_KEY) == token and b.status in ADOPTABLE and b.id not in known:
                    return b.id, b.input_file_id, str(b.status)
        except Exception as exc:
            raise BatchSubmitError(self._cut(f"listing batches failed: {_describe(exc)}")) from None
        return None

    # -- poll --------------------------------------------------------------------------------------

    def retrieve(self, batch_id: str) -> BatchState:
        """The batch's state; a failed poll is reported as status `unknown` (still open), never raised."""
        try:
            b = self._client.batches.retrieve(batch_id)
        except openai.NotFoundError as exc:  # the provider no longer knows it: closed, its pairs judged again
            return BatchState(batch_id, "not_found", detail=self._cut(f"poll failed: {_describe(exc)}"))
        except Exception as exc:
            return BatchState(batch_id, "unknown", detail=self._cut(f"poll failed: {_describe(exc)}"))
        errors = getattr(getattr(b, "errors", None), "data", None) or []
        detail = "; ".join(
            " ".join(str(x) for x in (e.code, e.message) if x) for e in errors if getattr(e, "message", None)
        )
        return BatchState(
            batch_id=b.id,
            status=str(b.status),
            output_file_id=b.output_file_id,
            error_file_id=b.error_file_id,
            detail=self._cut(detail) if detail else None,
        )

    def wait(
        self, batch_ids: Iterable[str], *, on_poll: Callable[[BatchState], None] | None = None
    ) -> dict[str, BatchState]:
        """Poll every batch until all are terminal or `wait_s` has passed: the interval starts at `poll_s` and
        doubles up to `poll_max_s`, never sleeping past the deadline. Returns each batch's last state."""
        ids = list(dict.fromkeys(batch_ids))
        states: dict[str, BatchState] = {}
        deadline = self._clock() + self.batch.wait_s
        interval = self.batch.poll_s
        while True:
            for batch_id in ids:
                if batch_id in states and states[batch_id].terminal:
                    continue
                states[batch_id] = self.retrieve(batch_id)
                if on_poll is not None:
                    on_poll(states[batch_id])
            left = deadline - self._clock()
            if all(s.terminal for s in states.values()) or left <= 0:
                return states
            self._sleep(min(interval, left))
            interval = min(interval * 2.0, self.batch.poll_max_s)

    # -- collect -----------------------------------------------------------------------------------

    def collect(self, state: BatchState, keys: Iterable[str]) -> dict[str, JudgeResult]:
        """One result per key of a terminal batch, from its output and error files. Raises OSError when a file
        cannot be downloaded (the batch stays open and is collected by the next run)."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, JudgeResult] = {}
        for file_id in (state.output_file_id, state.error_file_id):
            if not file_id:
                continue
            try:
                text = self._client.files.content(file_id).text
            except Exception as exc:
                raise OSError(self._cut(f"could not download {file_id}: {_describe(exc)}")) from None
            for line in text.splitlines():
                parsed = self._read_line(line)
                if parsed is not None and parsed.key in wanted and parsed.key not in found:
                    found[parsed.key] = parsed
        missing = (
            f"batch {state.batch_id} {state.status}" + (f": {state.detail}" if state.detail else "")
            if state.status != "completed"
            else f"batch {state.batch_id} completed without a result line for this pair"
        )
        return {k: found.get(k) or JudgeResult(k, "error", self._cut(missing), attempts=1) for k in wanted}

    def _read_line(self, line: str) -> JudgeResult | None:
        """A result for the line's custom_id, or None when the line is not a result line at all (garbled)."""
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if not isinstance(record, dict) or not isinstance(record.get("custom_id"), str):
            return None
        key = record["custom_id"]
        response = record.get("response")
        error = record.get("error")
        status = response.get("status_code") if isinstance(response, dict) else None
        body = response.get("body") if isinstance(response, dict) else None
        if error or status != 200 or not isinstance(body, dict):
            return JudgeResult(key, "error", self._cut(f"batch request failed: {_line_error(status, error, body)}"))
        try:
            completion = ChatCompletion.model_validate(body)
            message = completion.choices[0].message
        except Exception:
            return JudgeResult(key, "error", "batch: malformed response line (not a chat completion)")
        usage = completion.usage
        reply = whole_reply(message.content, _reasoning_of(message))
        return JudgeResult(
            key=key,
            verdict=parse_reply(reply),
            raw_answer=reply,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            attempts=1,
        )

    def _cut(self, text: str, limit: int = MESSAGE_LIMIT) -> str:
        return cut(self.secret_mask, text, limit)


def _describe(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        message = body.get("message") if isinstance(body, dict) else None
        return f"HTTP {exc.status_code}" + (f": {message}" if message else "")
    return _exc_text(exc)


def _line_error(status: object, error: object, body: object) -> str:
    message = None
    if isinstance(error, dict):
        message = " ".join(str(error.get(k)) for k in ("code", "message") if error.get(k))
    elif isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message") or "")
    head = f"HTTP {status}" if isinstance(status, int) else "no response"
    return f"{head}: {message}" if message else head
