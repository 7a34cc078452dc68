"""docs/judges.md's judge configurations, each against a server on 127.0.0.1 that answers as OpenAI, vLLM, llama.cpp's
server or Ollama does (tests/judge_dialects.py), through the real openai client: the verdicts, what the server
received, their error bodies, and reasoning models (reasoning first, inline or in a field; cut off by max_tokens)."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from citegate_assets.lib.config import parse_config
from citegate_assets.lib.support.judge.base import JudgeRequest
from citegate_assets.lib.support.judge.batch import BatchClient, BatchSettings
from citegate_assets.lib.support.judge.factory import make_judge
from citegate_assets.lib.support.judge.openai_judge import JudgeSettings, OpenAIJudge
from citegate_assets.lib.support.judge.parse import answer_after_reasoning, parse_reply, whole_reply
from tests.judge_dialects import REASONING, Dialect
from tests.judge_server import ScriptedJudgeServer

JUDGES = Path(__file__).resolve().parents[1] / "docs" / "judges.md"
PASSAGE = "Refunds take 3-5 business days. Support is available on weekdays."
CLAIMS = {"supported": "Refunds take 3-5 business days.", "refuted": "Refunds are never paid back."}
EXPECTED = {"supported": "yes", "refuted": "no"}
# the block (its first comment line) -> the dialect of the server it is tested against, and its options
BLOCKS = {
    "OpenAI API": ("openai", {}),
    "vLLM": ("vllm", {}),
    "llama.cpp server": ("llamacpp", {}),
    "Ollama": ("ollama", {}),
    "A reasoning model (here on Ollama)": ("ollama", {"reasoning": "field", "field": "reasoning"}),
}
DEFAULT_PORTS = {"vllm": 8000, "llamacpp": 8080, "ollama": 11434}


def page_blocks() -> dict[str, str]:
    """The toml blocks of docs/judges.md, by their first comment line."""
    blocks = re.findall(r"```toml\n(.*?)```", JUDGES.read_text(encoding="utf-8"), re.DOTALL)
    return {b.splitlines()[0].lstrip("# ").strip(): b for b in blocks}


def requests() -> list[JudgeRequest]:
    return [JudgeRequest(key=name, passage=PASSAGE, claim=claim) for name, claim in CLAIMS.items()]


def fast(settings: JudgeSettings, server: ScriptedJudgeServer, **overrides) -> OpenAIJudge:
    """The configured judge at the test server, with backoff short enough for a test."""
    values = dict(base_url=server.base_url, backoff_base_s=0.01, backoff_max_s=0.05, **overrides)
    return OpenAIJudge(replace(settings, **values), seed=0)


def test_the_page_has_a_block_for_every_tested_server():
    assert set(page_blocks()) == set(BLOCKS)


@pytest.mark.parametrize("name", list(BLOCKS))
def test_each_block_judges_against_its_server_as_written(name):
    dialect, options = BLOCKS[name]
    cfg = parse_config(tomllib.loads(page_blocks()[name]), "docs/judges.md").judge
    if dialect == "openai":
        assert cfg.base_url == "https://api.openai.com/v1" and cfg.api_key_env == "OPENAI_API_KEY"
        assert cfg.prices[cfg.model] == {"input": 0.40, "output": 1.60}
    else:
        assert cfg.base_url == f"http://127.0.0.1:{DEFAULT_PORTS[dialect]}/v1"
    assert cfg.mode == "cascade"
    env = {cfg.api_key_env: "sk-test-key"} if dialect == "openai" else {}
    with ScriptedJudgeServer(Dialect(dialect, model=cfg.model, **options).answer) as server:
        judge = make_judge(replace(cfg, base_url=server.base_url), env=env)
        results = judge.judge(requests())
    assert {r.key: r.verdict for r in results} == EXPECTED
    assert len(server.requests) == 2
    for body, headers in zip(server.requests, server.request_headers):
        assert body["model"] == cfg.model and body["temperature"] == 0 and body["max_tokens"] == cfg.max_tokens
        assert [m["role"] for m in body["messages"]] == ["user"]
        assert set(body) == {"model", "messages", "temperature", "max_tokens"}  # nothing a server could refuse
        assert headers["authorization"] == ("Bearer sk-test-key" if dialect == "openai" else "Bearer unused")
    if options:  # a reasoning model: the raw answer keeps its reasoning, before the answer
        assert all(r.raw_answer == f"<think>{REASONING}</think>{EXPECTED[r.key]}" for r in results)


REASONING_REPLIES = [
    ("vllm", "field", "reasoning_content"),  # --reasoning-parser, before 0.11
    ("vllm", "field", "reasoning"),  # 0.11 on
    ("vllm", "closing", "reasoning_content"),  # no parser, a template that opened <think> in the prompt
    ("llamacpp", "field", "reasoning_content"),  # --reasoning-format deepseek (the default, auto)
    ("llamacpp", "inline", "reasoning_content"),  # --reasoning-format none
    ("ollama", "inline", "reasoning"),  # a thinking model, think not parsed
    ("ollama", "field", "reasoning"),  # think on
]


@pytest.mark.parametrize("dialect,reasoning,field", REASONING_REPLIES)
def test_a_reasoning_reply_is_judged_on_the_answer_after_its_reasoning(dialect, reasoning, field):
    settings = JudgeSettings(base_url="http://127.0.0.1:1/v1", model="qwen3:8b", max_tokens=4096)
    with ScriptedJudgeServer(Dialect(dialect, model="qwen3:8b", reasoning=reasoning, field=field).answer) as server:
        results = fast(settings, server).judge(requests())
    assert {r.key: r.verdict for r in results} == EXPECTED
    for r in results:
        assert REASONING in r.raw_answer and r.raw_answer.rstrip().endswith(EXPECTED[r.key])  # kept whole


@pytest.mark.parametrize("dialect,reasoning,field", REASONING_REPLIES)
def test_a_reasoning_model_cut_off_by_max_tokens_is_unparseable_never_a_pass(dialect, reasoning, field):
    """max_tokens = 5 (the default) ends the reply inside the reasoning: no answer, so `unparseable`."""
    settings = JudgeSettings(base_url="http://127.0.0.1:1/v1", model="qwen3:8b")
    assert settings.max_tokens == 5
    with ScriptedJudgeServer(Dialect(dialect, model="qwen3:8b", reasoning=reasoning, field=field).answer) as server:
        results = fast(settings, server).judge(requests())
    assert [r.verdict for r in results] == ["unparseable", "unparseable"]
    cut = " ".join(REASONING.split()[:5])
    assert all(cut in r.raw_answer and r.attempts == 1 for r in results)  # the partial reasoning is kept


def test_the_answer_after_the_reasoning_is_parsed_as_strictly():
    loose = Dialect("vllm", model="m", reasoning="field", verdict=lambda _req: "Yes, the passage says so.")
    with ScriptedJudgeServer(loose.answer) as server:
        results = fast(JudgeSettings(base_url="http://127.0.0.1:1/v1", model="m", max_tokens=4096), server).judge(
            requests()
        )
    assert [r.verdict for r in results] == ["unparseable", "unparseable"]


@pytest.mark.parametrize(
    "dialect,message",
    [
        ("openai", "The model `other-model` does not exist or you do not have access to it."),
        ("vllm", "The model `other-model` does not exist."),
        ("ollama", 'model "other-model" not found, try pulling it first'),
    ],
)
def test_a_wrong_model_is_an_error_naming_what_the_server_said_never_retried(dialect, message):
    settings = JudgeSettings(base_url="http://127.0.0.1:1/v1", model="other-model")
    with ScriptedJudgeServer(Dialect(dialect, model="served-model").answer) as server:
        results = fast(settings, server).judge(requests())
    assert [r.verdict for r in results] == ["error", "error"]
    assert all(r.raw_answer.startswith("404 Not Found") and message in r.raw_answer for r in results)
    assert all(r.attempts == 1 for r in results) and len(server.requests) == 2


def test_llama_cpp_loading_its_model_is_retried_until_it_answers():
    settings = JudgeSettings(base_url="http://127.0.0.1:1/v1", model="local-gguf", concurrency=1, max_retries=3)
    with ScriptedJudgeServer(Dialect("llamacpp", loading_replies=2).answer) as server:
        results = fast(settings, server).judge(requests())
    assert {r.key: r.verdict for r in results} == EXPECTED
    assert [r.attempts for r in results] == [3, 1] and len(server.requests) == 4


def test_an_openai_reasoning_model_refuses_max_tokens_an_error_not_a_pass():
    settings = JudgeSettings(base_url="http://127.0.0.1:1/v1", model="o3-mini")
    with ScriptedJudgeServer(Dialect("openai", model="o3-mini").answer) as server:
        results = fast(settings, server).judge(requests())
    assert [r.verdict for r in results] == ["error", "error"]
    assert all("400 Bad Request" in r.raw_answer and "'max_tokens' is not supported" in r.raw_answer for r in results)


def test_a_batch_output_line_with_reasoning_is_judged_on_its_answer():
    """The Batch API's output lines go through the same reading: the reasoning field first, the answer after."""
    client = BatchClient(JudgeSettings(base_url="http://127.0.0.1:1/v1", model="m"), BatchSettings())
    try:
        body = json.loads(Dialect("vllm", model="m", reasoning="field").answer(_request("yes"), 0).body or b"")
        cut = json.loads(Dialect("vllm", model="m", reasoning="field").answer(_request("yes", 5), 0).body or b"")
        lines = [
            json.dumps({"custom_id": key, "response": {"status_code": 200, "body": b}})
            for key, b in (("whole", body), ("cut", cut))
        ]
        whole, short = (client._read_line(line) for line in lines)
    finally:
        client.close()
    assert whole is not None and whole.verdict == "yes" and whole.raw_answer == f"<think>{REASONING}</think>yes"
    assert short is not None and short.verdict == "unparseable" and short.raw_answer.startswith("<think>Let me")


def _request(answer: str, max_tokens: int = 4096) -> dict:
    claim = CLAIMS["supported"] if answer == "yes" else CLAIMS["refuted"]
    prompt = f"PASSAGE:\n{PASSAGE}\n\nCLAIM:\n{claim}\n\nDoes the PASSAGE alone entail the CLAIM?"
    return {"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}


@pytest.mark.parametrize(
    "content,reasoning,verdict",
    [
        ("yes", None, "yes"),
        ("<think>the passage says 3-5 days</think>\n\nyes", None, "yes"),
        ("the passage says so</think>no", None, "no"),  # the block opened in the prompt
        ("<think>a long thought that never", None, "unparseable"),  # cut off mid-reasoning
        ("<think>x</think>yes</think>", None, "unparseable"),  # the answer is what follows the last close
        ("yes", "the passage says 3-5 days", "yes"),
        (None, "the passage says 3-5", "unparseable"),  # content null: cut off
        ("<think>kept</think>partial", "kept", "partial"),  # llama.cpp deepseek-legacy: both
        ("<think>why</think> yes because", None, "unparseable"),
    ],
)
def test_reasoning_is_read_first_and_the_answer_strictly(content, reasoning, verdict):
    reply = whole_reply(content, reasoning)
    assert parse_reply(reply) == verdict
    if reasoning and content is not None and "</think>" not in content:
        assert reply == f"<think>{reasoning}</think>{content}"
    if content is None and reasoning:
        assert reply == f"<think>{reasoning}" and answer_after_reasoning(reply) is None
