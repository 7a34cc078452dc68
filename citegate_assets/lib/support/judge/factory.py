"""Pick the judge from [judge] and the environment: an OpenAI-compatible endpoint, or an offline judge, and the
support gate's tiers (make_tiers: the screen, the LLM judge, or both in a cascade).

With no endpoint the offline judge is the screen citegate-screen-v1 (screen.py: yes, no or undecided, failing
closed). `[judge] offline = "lexical"` or `"heuristic"` selects the older three-way judges (citegate-lexical-v3,
citegate-heuristic-v1) instead, with a warning: their `yes` does not fail closed on unseen data."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import replace

from citegate_assets.lib.core.processes import worker_count
from citegate_assets.lib.support.judge.base import Judge
from citegate_assets.lib.support.judge.heuristic import HEURISTIC_MODEL
from citegate_assets.lib.support.judge.lexical import LEXICAL_MODEL
from citegate_assets.lib.support.judge.screen import SCREEN_MODEL
from citegate_assets.lib.support.judge.secrets import NO_KEY, url_secrets
from citegate_assets.lib.support.judge.settings import JudgeConfig
from citegate_assets.lib.support.judge.tiers import JudgeTiers

# [judge] offline -> model name
OFFLINE_JUDGES = {"screen": SCREEN_MODEL, "lexical": LEXICAL_MODEL, "heuristic": HEURISTIC_MODEL}
DEFAULT_OFFLINE = "screen"
THREE_WAY_OFFLINE = ("lexical", "heuristic")  # comparison candidates: they never say `undecided`
log = logging.getLogger(__name__)
ENV_BASE_URL = "CITEGATE_JUDGE_BASE_URL"
ENV_MODEL = "CITEGATE_JUDGE_MODEL"


def effective_judge_config(cfg: JudgeConfig, env: Mapping[str, str] | None = None) -> JudgeConfig:
    """The environment overrides the file: CITEGATE_JUDGE_BASE_URL and CITEGATE_JUDGE_MODEL."""
    env = os.environ if env is None else env
    base_url, model = env.get(ENV_BASE_URL), env.get(ENV_MODEL)
    if not base_url and not model:
        return cfg
    return replace(cfg, base_url=base_url or cfg.base_url, model=model or cfg.model)


def configured_secrets(cfg: JudgeConfig, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Every secret [judge] names, masked in all a judge answers (lib/support/judge/secrets.py): the values of its key
    variables in `env` (the judge's and the secondary judge's), and the credentials in their base URLs and in
    CITEGATE_JUDGE_BASE_URL."""
    env = os.environ if env is None else env
    names = [cfg.api_key_env] + ([cfg.secondary.api_key_env] if cfg.secondary is not None else [])
    urls = [cfg.base_url, env.get(ENV_BASE_URL)] + ([cfg.secondary.base_url] if cfg.secondary is not None else [])
    values = [env.get(name) or "" for name in names if name]
    values += [piece for url in urls for piece in url_secrets(url)]
    return tuple(sorted({v for v in values if v}))


def make_judge(cfg: JudgeConfig, env: Mapping[str, str] | None = None, *, masked: tuple[str, ...] = ()) -> Judge:
    """masked: secrets besides those `cfg` names that the judge masks in what it answers (the primary's, for the
    secondary judge)."""
    env = os.environ if env is None else env
    configured = cfg
    cfg = effective_judge_config(cfg, env)
    if not cfg.base_url:
        name = str(getattr(cfg, "offline", DEFAULT_OFFLINE) or DEFAULT_OFFLINE)
        if name in THREE_WAY_OFFLINE:
            log.warning(
                "[judge] offline = %r: %s does not fail closed (its yes held no false pass bound on unseen data); "
                "the screen (offline = %r) does",
                name,
                OFFLINE_JUDGES[name],
                DEFAULT_OFFLINE,
            )
        return make_offline_judge(name, worker_count(int(getattr(cfg, "workers", 0) or 0)))
    from citegate_assets.lib.support.judge.openai_judge import JudgeSettings, OpenAIJudge

    settings = JudgeSettings(
        base_url=cfg.base_url,
        model=cfg.model,
        api_key=env.get(cfg.api_key_env) or NO_KEY,  # local servers often need none; never logged
        masked=(*masked, *configured_secrets(configured, env)),
        concurrency=int(cfg.concurrency),
        timeout_s=float(cfg.timeout_s),
        max_tokens=int(cfg.max_tokens),
        max_retries=int(cfg.max_retries),
        backoff_base_s=float(cfg.backoff_base_s),
        backoff_max_s=float(cfg.backoff_max_s),
        breaker_threshold=int(cfg.breaker_threshold),
    )
    return OpenAIJudge(settings)


def make_tiers(cfg: JudgeConfig, env: Mapping[str, str] | None = None) -> JudgeTiers:
    """The support gate's judges (lib/support/judge/tiers.py): with no endpoint the offline judge alone; with one the
    LLM
    judge, after the screen when [judge] mode = "cascade"."""
    env = os.environ if env is None else env
    cfg = effective_judge_config(cfg, env)
    judge = make_judge(cfg, env)
    if not cfg.base_url:
        return JudgeTiers(screen=judge, llm=None, mode="offline")
    if cfg.mode == "cascade":
        screen = make_offline_judge(DEFAULT_OFFLINE, worker_count(int(getattr(cfg, "workers", 0) or 0)))
        return JudgeTiers(screen=screen, llm=judge, mode="cascade")
    return JudgeTiers(screen=None, llm=judge, mode=str(cfg.mode))


def make_secondary_judge(
    cfg: JudgeConfig, env: Mapping[str, str] | None = None, *, primary_base_url: str | None = None
) -> Judge | None:
    """The candidate judge of [judge.secondary], or None when there is none. With neither base_url nor model it is
    the offline judge [judge.secondary] offline names; with a model, it is called at its own base_url, else at the
    primary's (primary_base_url when given, as the primary judge resource resolved it, else [judge] and the
    environment). Timeouts, retries, concurrency and the breaker are the primary's. CITEGATE_JUDGE_MODEL never
    renames it."""
    secondary = cfg.secondary
    if secondary is None:
        return None
    if not secondary.base_url and not secondary.model:
        return make_offline_judge(secondary.offline, worker_count(int(getattr(cfg, "workers", 0) or 0)))
    env = os.environ if env is None else env
    if primary_base_url is None:
        primary_base_url = effective_judge_config(cfg, env).base_url
    base_url = secondary.base_url or primary_base_url
    if not base_url:
        raise ValueError(
            f"[judge.secondary] model = {secondary.model!r} needs an endpoint: set [judge.secondary] base_url "
            "(the primary judge has none), or drop model to compare the offline judge `offline` names"
        )
    own = replace(
        cfg,
        base_url=base_url,
        model=secondary.model,
        api_key_env=secondary.api_key_env or cfg.api_key_env,
        secondary=None,
    )
    return make_judge(
        own,
        env={k: v for k, v in env.items() if k not in (ENV_BASE_URL, ENV_MODEL)},
        masked=configured_secrets(cfg, env),
    )


def make_offline_judge(name: str = DEFAULT_OFFLINE, workers: int = 1) -> Judge:
    """The offline judge by its [judge] offline name: "screen" (the default), "lexical" or "heuristic"; workers:
    the processes a large pass is split across (lib/core/processes.py)."""
    if name == "screen":
        from citegate_assets.lib.support.judge.screen import ScreenJudge

        return ScreenJudge(workers=workers)
    if name == "heuristic":
        from citegate_assets.lib.support.judge.heuristic import HeuristicJudge

        return HeuristicJudge(workers)
    if name == "lexical":
        from citegate_assets.lib.support.judge.lexical import LexicalJudge

        return LexicalJudge(workers=workers)
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
