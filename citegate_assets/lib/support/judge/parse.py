"""Strict verdict parsing: yes / partial / no, tolerating only case, surrounding whitespace and one
trailing period. Anything else is `unparseable` — a failure, with the raw text kept.

A reasoning model's reply puts its reasoning first: inline (`<think>...</think>` in the content: Ollama, llama.cpp's
`--reasoning-format none`, DeepSeek-R1 and Qwen3 templates, some of which open the block in the prompt so the reply
holds only `</think>`) or in a separate field (`reasoning_content`: vLLM before 0.11 and llama.cpp's
`--reasoning-format deepseek`; `reasoning`: vLLM from 0.11, Ollama). The verdict is parsed, as strictly, on the answer
after the reasoning; a reply cut off before its reasoning ended (`max_tokens` too small) has no answer: `unparseable`.
"""

from __future__ import annotations

from citegate_assets.lib.support.judge.base import VERDICTS

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def parse_verdict(raw: str | None) -> str:
    if raw is None:
        return "unparseable"
    text = raw.strip()
    if text.endswith("."):
        text = text[:-1]
    text = text.lower()
    return text if text in VERDICTS else "unparseable"


def answer_after_reasoning(reply: str | None) -> str | None:
    """The text after the last `</think>`; None when the reply opens `<think>` and never closes it (cut off
    mid-reasoning); the reply itself when it holds no reasoning block."""
    if reply is None:
        return None
    close = reply.rfind(THINK_CLOSE)
    if close >= 0:
        return reply[close + len(THINK_CLOSE) :]
    if reply.lstrip().startswith(THINK_OPEN):
        return None
    return reply


def whole_reply(content: str | None, reasoning: str | None) -> str | None:
    """The reply as one text, kept whole for raw_answer: a separate reasoning field goes first, between think tags
    (unclosed when there is no content: the reply was cut off mid-reasoning), unless the content holds it already."""
    if not reasoning or (content is not None and THINK_CLOSE in content):
        return content
    if content is None:
        return THINK_OPEN + reasoning
    return THINK_OPEN + reasoning + THINK_CLOSE + content


def parse_reply(reply: str | None) -> str:
    """The verdict of a whole reply (whole_reply): parse_verdict on the answer after any reasoning."""
    return parse_verdict(answer_after_reasoning(reply))
