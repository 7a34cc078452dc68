"""[judge] and [judge.secondary] of citegate.toml: the support judge, its limits, prices and mode, and a candidate judge
compared on a sample."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config_fields import (
    BadValue,
    as_table,
    build_section,
    check_base_url,
    check_choice,
    check_env_name,
    check_integer,
    check_number,
    check_prices,
    check_string,
    checked_field,
)

JUDGE_MODES = ("online", "batch", "cascade")


@dataclass(frozen=True)
class SecondaryJudgeConfig:
    """[judge.secondary]: a candidate judge run on a sample of the primary's judged pairs, for agreement only
    (defs/support.py judge_agreement); it never changes a verdict, the queue or a metric. Timeouts, retries and
    concurrency are the primary's."""

    # "" = the primary's endpoint (another model on the same provider)
    base_url: str = checked_field("", check_base_url)
    # the candidate's model; required with base_url. Neither base_url nor model: the offline judge `offline` names
    model: str = checked_field("", check_string())
    # "" = the primary's api_key_env
    api_key_env: str = checked_field("", lambda key, value: check_env_name(key, value) if value != "" else "")
    # the share of the primary's judged pairs also sent to the secondary (a stable hash sample)
    sample_rate: float = checked_field(0.1, check_number(0, 1))
    # the secondary when neither base_url nor model is set: lexical | heuristic
    offline: str = checked_field("lexical", check_choice(("lexical", "heuristic")))


def _secondary(key: str, value: object) -> SecondaryJudgeConfig:
    secondary = build_section(SecondaryJudgeConfig, as_table(key, value), key)
    if secondary.base_url and not secondary.model.strip():
        raise BadValue(f"[{key}] sets base_url: it also needs model (the candidate judge's model name)")
    return secondary


@dataclass(frozen=True)
class JudgeConfig:
    """[judge]: the support judge. An empty base_url means the offline judge (`offline`)."""

    base_url: str = checked_field("", check_base_url)
    model: str = checked_field("gpt-4.1-mini", check_string(non_empty=True))
    # the name of the variable holding the key, never the key
    api_key_env: str = checked_field("CITEGATE_JUDGE_API_KEY", check_env_name)
    concurrency: int = checked_field(8, check_integer(1))
    timeout_s: float = checked_field(30.0, check_number(0, low_open=True))
    max_tokens: int = checked_field(5, check_integer(1))
    max_retries: int = checked_field(5, check_integer(0))
    backoff_base_s: float = checked_field(0.5, check_number(0))
    backoff_max_s: float = checked_field(30.0, check_number(0, low_open=True))
    breaker_threshold: int = checked_field(10, check_integer(1))
    # model -> {"input": USD per 1M tokens, "output": ...}
    prices: dict = field(default_factory=dict, metadata={"check": check_prices})
    # online: one chat-completions call per pair; batch: the day's uncached pairs as one OpenAI Batch API job;
    # cascade: the screen first, the LLM (online) only on what it leaves undecided. Without base_url the screen alone
    mode: str = checked_field("online", check_choice(JUDGE_MODES))
    # batch: how long a run polls an open batch before leaving it open for the next run (its pairs: `error`)
    batch_wait_s: float = checked_field(3600.0, check_number(0))
    # batch: the first poll interval, doubled after each poll up to batch_poll_max_s
    batch_poll_s: float = checked_field(5.0, check_number(0, low_open=True))
    batch_poll_max_s: float = checked_field(300.0, check_number(0, low_open=True))
    # batch: at most this many requests per batch (OpenAI's limit is 50,000)
    batch_max_requests: int = checked_field(50000, check_integer(1))
    # batch: the share of the online price a batch call costs (OpenAI: half)
    batch_discount: float = checked_field(0.5, check_number(0, 1))
    # batch: the nightly schedule runs from the earliest day with "batch pending" verdicts, at most this many days
    # before yesterday, so a batch still open at a run's deadline is collected by the next nightly (0: yesterday only)
    batch_pending_days: int = checked_field(7, check_integer(0))
    # the judge when no base_url is set (lib/judge/factory.py): screen (citegate-screen-v1, fails closed) | lexical |
    # heuristic (three-way judges kept for comparison; a warning says they do not fail closed)
    offline: str = checked_field("screen", check_choice(("screen", "lexical", "heuristic")))
    # processes for the support gate's pure-Python work, the offline judge and the numeric check (lib/processes.py):
    # 0 = one per core, at most 4; 1 = in process
    workers: int = checked_field(0, check_integer(0))
    # [judge.secondary]: a candidate judge compared on a sample (None: no second judge, nothing changes)
    secondary: SecondaryJudgeConfig | None = field(default=None, metadata={"check": _secondary})
