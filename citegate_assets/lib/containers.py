"""Step 1 of N: decode the log container (`prompt_encoding`) into the messages that were sent.

A prompt is returned as an ordered list of (role, text) messages so that role boundaries survive:
a plain-text prompt is one message with role "text".
"""

from __future__ import annotations

import ast
import json

ENCODINGS = ("text", "json", "python_repr")


class PromptDecodeError(ValueError):
    """The prompt field does not decode under its declared encoding."""


Message = tuple[str, str]


def decode_prompt(prompt: str, encoding: str) -> list[Message]:
    if encoding == "text":
        return [("text", prompt)]
    if encoding == "python_repr":
        return [("text", _decode_repr(prompt))]
    if encoding == "json":
        return _decode_request_body(prompt)
    raise PromptDecodeError(f"unknown prompt_encoding {encoding!r} (expected one of {', '.join(ENCODINGS)})")


def _decode_repr(prompt: str) -> str:
    # literal_eval evaluates literals only, never code: safe on untrusted logs.
    try:
        value = ast.literal_eval(prompt.strip())
    except Exception as exc:  # literal_eval raises ValueError, SyntaxError, TypeError, MemoryError, RecursionError…
        raise PromptDecodeError(f"python_repr prompt is not a Python string literal: {type(exc).__name__}: {exc}") from None
    if not isinstance(value, str):
        raise PromptDecodeError(f"python_repr prompt decodes to {type(value).__name__}, not str")
    return value


def _decode_request_body(prompt: str) -> list[Message]:
    try:
        body = json.loads(prompt)
    except (ValueError, RecursionError) as exc:
        raise PromptDecodeError(f"json prompt is not valid JSON: {exc}") from None
    if isinstance(body, str):  # a JSON string literal holding the rendered prompt
        return [("text", body)]
    if not isinstance(body, dict):
        raise PromptDecodeError("json prompt is neither a request body object nor a string")
    messages: list[Message] = []
    # Anthropic Messages API: the system prompt is a top-level field, sent before the turns.
    if "system" in body:
        messages.append(("system", _content_text(body["system"], "system")))
    if "messages" in body:
        turns = body["messages"]
    elif "input" in body:  # OpenAI Responses API
        turns = body["input"] if isinstance(body["input"], list) else [{"role": "user", "content": body["input"]}]
    elif "prompt" in body and isinstance(body["prompt"], str):  # completions API
        return messages + [("text", body["prompt"])]
    else:
        raise PromptDecodeError("json prompt has no 'messages', 'input' or 'prompt' field")
    if not isinstance(turns, list):
        raise PromptDecodeError("json prompt field 'messages' is not a list")
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or "content" not in turn:
            raise PromptDecodeError(f"json prompt messages[{i}] has no 'content'")
        messages.append((str(turn.get("role", "user")), _content_text(turn["content"], f"messages[{i}]")))
    return messages


def _content_text(content: object, where: str) -> str:
    """Text of a message's content: a string, or the text parts of a content-block list in order."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise PromptDecodeError(f"json prompt {where}.content is neither a string nor a list")
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            if isinstance(block.get("text"), str):  # {"type": "text"|"input_text", "text": ...}
                parts.append(block["text"])
            elif isinstance(block.get("source"), dict) and isinstance(block["source"].get("data"), str):
                parts.append(block["source"]["data"])  # Anthropic document block with plain text
            elif isinstance(block.get("content"), str):  # OpenTelemetry-style {"type": "text", "content": ...}
                parts.append(block["content"])
    return "\n\n".join(parts)
