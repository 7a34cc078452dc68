"""How real OpenAI-compatible servers answer /v1/chat/completions, for tests/judge_server.py's ScriptedJudgeServer.

    with ScriptedJudgeServer(Dialect("vllm", model="Qwen/Qwen3-8B", reasoning="field").answer) as server: ...

Each dialect answers in its server's body shape and errors (from their sources and docs):
- openai: `{"error": {"message", "type", "param", "code"}}`; a wrong model is 404 `model_not_found`; an o-series
  (reasoning) model refuses `max_tokens` and a temperature of 0 with a 400 `unsupported_parameter`/`_value`.
- vllm: `chatcmpl-<hex>` ids, `stop_reason`, `prompt_logprobs`; before 0.11 a flat error body
  `{"object": "error", "message", "type": "NotFoundError", "param", "code": 404}`; with `--reasoning-parser` the
  reasoning is in `reasoning_content` (before 0.11) or `reasoning` (0.11 on), and a reply cut off by `max_tokens`
  before its reasoning ended has `content: null`.
- llamacpp: `timings`, `system_fingerprint` `b<build>-<hash>`; it serves the one model it loaded whatever the name;
  503 `{"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}` while loading;
  `--reasoning-format deepseek` puts the reasoning in `reasoning_content`, `none` leaves `<think>` in the content.
- ollama: `fp_ollama`; 404 `model "x" not found, try pulling it first` (`not_found_error`); a thinking model's
  reasoning in `reasoning` (think on) or as `<think>` in the content; `max_tokens` becomes `num_predict`.

Tokens are counted as whitespace-separated words; `max_tokens` cuts the reply (reasoning first) at that many and
sets finish_reason `length`. Every request is recorded by the ScriptedJudgeServer (`requests`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from tests.judge_server import Reply

DIALECTS = ("openai", "vllm", "llamacpp", "ollama")
REASONING = "Let me compare the claim with the passage word by word before I answer the question asked of me."


def verdict_by_claim(request_json: dict) -> str:
    """The scripted judge's answer: `no` when the claim holds the word "never", else `yes`."""
    prompt = request_json["messages"][0]["content"]
    claim = prompt.split("CLAIM:\n", 1)[1].split("\n\nDoes the PASSAGE", 1)[0]
    return "no" if "never" in claim.split() else "yes"


@dataclass
class Dialect:
    dialect: str
    model: str = "judge-model"
    # None: an instruct model. "field": the reasoning in a field of its own (vLLM with --reasoning-parser, llama.cpp's
    # deepseek format, Ollama with think on); "inline": `<think>...</think>` before the answer in the content;
    # "closing": only `</think>` in the content (a template that opened the block in the prompt: DeepSeek-R1)
    reasoning: str | None = None
    field: str = "reasoning_content"  # the field's name: reasoning_content, or reasoning (vLLM 0.11 on, Ollama)
    loading_replies: int = 0  # llamacpp: the first this many requests get 503 Loading model
    verdict: Callable[[dict], str] = verdict_by_claim

    def answer(self, request_json: dict, index: int) -> Reply:
        error = self._refusal(request_json, index)
        if error is not None:
            return error
        words = self._reasoning_words()
        limit = request_json.get("max_tokens")
        answer = self.verdict(request_json)
        cut = isinstance(limit, int) and limit < len(words) + 1
        kept = words[:limit] if cut else words
        content, reasoning = self._split(kept, None if cut else answer, cut)
        body = self._completion(request_json, content, reasoning, "length" if cut else "stop", len(kept) + 1)
        return Reply(body=json.dumps(body).encode())

    # -- what each server refuses -------------------------------------------------------------------------------

    def _refusal(self, request_json: dict, index: int) -> Reply | None:
        asked = request_json.get("model")
        if self.dialect == "llamacpp":
            if index < self.loading_replies:
                return _error(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
            return None  # one loaded model, whatever name the request gives
        if asked != self.model:
            return self._unknown_model(str(asked))
        if self.dialect == "openai" and self.model.startswith(("o1", "o3", "o4", "gpt-5")):
            if "max_tokens" in request_json:
                return _error(400, _openai_error(
                    "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                    "'max_completion_tokens' instead.", "invalid_request_error", "max_tokens", "unsupported_parameter"
                ))  # fmt: skip
            if request_json.get("temperature") not in (None, 1):
                return _error(400, _openai_error(
                    "Unsupported value: 'temperature' does not support 0 with this model. Only the default (1) "
                    "value is supported.", "invalid_request_error", "temperature", "unsupported_value"
                ))  # fmt: skip
        return None

    def _unknown_model(self, asked: str) -> Reply:
        if self.dialect == "openai":
            message = f"The model `{asked}` does not exist or you do not have access to it."
            return _error(404, _openai_error(message, "invalid_request_error", None, "model_not_found"))
        if self.dialect == "vllm":
            body = {
                "object": "error",
                "message": f"The model `{asked}` does not exist.",
                "type": "NotFoundError",
                "param": None,
                "code": 404,
            }
            return _error(404, body)
        message = f'model "{asked}" not found, try pulling it first'
        return _error(404, {"error": {"message": message, "type": "not_found_error", "param": None, "code": None}})

    # -- the reply ----------------------------------------------------------------------------------------------

    def _reasoning_words(self) -> list[str]:
        return REASONING.split() if self.reasoning else []

    def _split(self, words: list[str], answer: str | None, cut: bool) -> tuple[str | None, str | None]:
        """(content, separate reasoning) of a reply whose reasoning is `words`, then `answer` (None: cut off)."""
        thought = " ".join(words)
        if self.reasoning is None:
            return answer if answer is not None else " ".join(words), None
        if self.reasoning == "field":
            return answer, thought  # vLLM: content null when the reasoning never ended
        opening = "<think>" if self.reasoning == "inline" else ""
        if cut:
            return opening + thought, None
        return f"{opening}{thought}</think>\n\n{answer}", None

    def _completion(self, request_json: dict, content: str | None, reasoning: str | None, finish: str, n: int) -> dict:
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in request_json.get("messages", []))
        message: dict = {"role": "assistant", "content": content}
        if reasoning is not None:
            message[self.field] = reasoning
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": n, "total_tokens": prompt_tokens + n}
        created = int(time.time())
        if self.dialect == "openai":
            message.update(refusal=None, annotations=[])
            return {
                "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
                "object": "chat.completion",
                "created": created,
                "model": f"{self.model}-2025-04-14",
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": {
                    **usage,
                    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
                },
                "service_tier": "default",
                "system_fingerprint": "fp_6f2eabb9a5",
            }
        if self.dialect == "vllm":
            message["tool_calls"] = []
            choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish, "stop_reason": None}
            return {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": created,
                "model": self.model,
                "choices": [choice],
                "usage": {**usage, "prompt_tokens_details": None},
                "prompt_logprobs": None,
            }
        if self.dialect == "llamacpp":
            return {
                "choices": [{"finish_reason": finish, "index": 0, "message": message}],
                "created": created,
                "model": request_json.get("model"),
                "system_fingerprint": "b5461-8f1dcd4b",
                "object": "chat.completion",
                "usage": usage,
                "id": f"chatcmpl-{uuid.uuid4().hex[:32]}",
                "timings": {"prompt_n": prompt_tokens, "predicted_n": n, "predicted_ms": 12.5},
            }
        return {
            "id": f"chatcmpl-{index_of(request_json)}",
            "object": "chat.completion",
            "created": created,
            "model": self.model,
            "system_fingerprint": "fp_ollama",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }


def index_of(request_json: dict) -> int:
    return abs(hash(json.dumps(request_json, sort_keys=True))) % 1000


def _openai_error(message: str, kind: str, param: str | None, code: str | None) -> dict:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _error(status: int, body: dict) -> Reply:
    return Reply(status=status, body=json.dumps(body).encode())
