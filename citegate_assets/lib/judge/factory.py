"""Pick the judge from [judge] and the environment: an OpenAI-compatible endpoint, or an offline judge.

With no endpoint the offline judge is citegate-lexical-v2 (lexical.py, learned); `[judge] offline = "heuristic"`
selects the hand-tuned rules of citegate-heuristic-v1 (heuristic.py) instead."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from ..config import JudgeConfig
from .base import Judge
from .heuristic import HEURISTIC_MODEL
from .lexical import LEXICAL_MODEL

OFFLINE_JUDGES = {"lexical": LEXICAL_MODEL, "heuristic": HEURISTIC_MODEL}  # [judge] offline -> model name
DEFAULT_OFFLINE = "lexical"
ENV_BASE_URL = "CITEGATE_JUDGE_BASE_URL"
ENV_MODEL = "CITEGATE_JUDGE_MODEL"


def effective_judge_config(cfg: JudgeConfig, env: Mapping[str, str] | None = None) -> JudgeConfig:
    """The environment overrides the file: CITEGATE_JUDGE_BASE_URL and CITEGATE_JUDGE_MODEL."""
    env = os.environ if env is None else env
    base_url, model = env.get(ENV_BASE_URL), env.get(ENV_MODEL)
    if not base_url and not model:
        return cfg
    return replace(cfg, base_url=base_url or cfg.base_url, model=model or cfg.model)


def make_judge(cfg: JudgeConfig, env: Mapping[str, str] | None = None) -> Judge:
    env = os.environ if env is None else env
    cfg = effective_judge_config(cfg, env)
    if not cfg.base_url:
        return make_offline_judge(str(getattr(cfg, "offline", DEFAULT_OFFLINE) or DEFAULT_OFFLINE))
    from .openai_judge import JudgeSettings, OpenAIJudge

    settings = JudgeSettings(
        base_url=cfg.base_url,
        model=cfg.model,
        api_key=env.get(cfg.api_key_env) or "unused",  # local servers often need none; never logged
        concurrency=int(cfg.concurrency),
        timeout_s=float(cfg.timeout_s),
        max_tokens=int(cfg.max_tokens),
        max_retries=int(cfg.max_retries),
        backoff_base_s=float(cfg.backoff_base_s),
        backoff_max_s=float(cfg.backoff_max_s),
        breaker_threshold=int(cfg.breaker_threshold),
    )
    return OpenAIJudge(settings)


def make_offline_judge(name: str = DEFAULT_OFFLINE) -> Judge:
    """The offline judge by its [judge] offline name: "lexical" (the default) or "heuristic"."""
    if name == "heuristic":
        from .heuristic import HeuristicJudge

        return HeuristicJudge()
    if name == "lexical":
        from .lexical import LexicalJudge

        return LexicalJudge()
    raise ValueError(f"[judge] offline: unknown offline judge {name!r}; expected one of {sorted(OFFLINE_JUDGES)}")


def estimated_cost(
    prices: Mapping, model: str, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """USD from [judge.prices.MODEL] (per million tokens); None when the model has no price or no usage.
    An offline judge costs nothing."""
    if model in OFFLINE_JUDGES.values():
        return 0.0
    price = prices.get(model)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * float(price["input"]) + completion_tokens * float(price["output"])) / 1e6
