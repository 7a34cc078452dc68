"""[judge] and [judge.secondary] of citegate.toml: the support judge, its limits, prices and mode, and a candidate judge
compared on a sample."""

from __future__ import annotations

from dataclasses import dataclass, field

from citegate_assets.lib.core.config_fields import (
    BadValue,
    as_table,
    build_section,
    check_base_url,
    check_choice,
    check_env_name,
    check_env_name_or_empty,
    check_integer,
    check_number,
    check_prices,
    check_string,
    checked_field,
    expects,
)

JUDGE_MODES = ("online", "batch", "cascade")


@dataclass(frozen=True)
class SecondaryJudgeConfig:
    """[judge.secondary]: a candidate judge run on a sample of the primary's judged pairs, for agreement only
    (defs/support.py judge_agreement); it never changes a verdict, the queue or a metric. Timeouts, retries and
    concurrency are the primary's."""

    base_url: str = checked_field("", check_base_url, "the candidate's endpoint; \"\" = the primary's endpoint")
    model: str = checked_field(
        "",
        check_string(),
        "the candidate's model; required with base_url. Neither base_url nor model: the offline judge `offline` names",
    )
    api_key_env: str = checked_field(
        "", check_env_name_or_empty, 'the variable holding its key; "" = the primary\'s api_key_env'
    )
    sample_rate: float = checked_field(
        0.1,
        check_number(0, 1),
        "the share of the primary's judged pairs also sent to the candidate (a stable hash sample)",
    )
    offline: str = checked_field(
        "lexical", check_choice(("lexical", "heuristic")), "the candidate when neither base_url nor model is set"
    )


@expects("a table (the keys of [judge.secondary])")
def _secondary(key: str, value: object) -> SecondaryJudgeConfig:
    secondary = build_section(SecondaryJudgeConfig, as_table(key, value), key)
    if secondary.base_url and not secondary.model.strip():
        raise BadValue(f"[{key}] sets base_url: it also needs model (the candidate judge's model name)")
    return secondary


@dataclass(frozen=True)
class JudgeConfig:
    """[judge]: the support judge. An empty base_url means the offline judge (`offline`); the environment overrides
    base_url, model and the key (CITEGATE_JUDGE_BASE_URL, CITEGATE_JUDGE_MODEL, CITEGATE_JUDGE_API_KEY)."""

    base_url: str = checked_field(
        "", check_base_url, 'the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1; "" = the offline judge'
    )
    model: str = checked_field("gpt-4.1-mini", check_string(non_empty=True), "the judge model")
    api_key_env: str = checked_field(
        "CITEGATE_JUDGE_API_KEY",
        check_env_name,
        "the name of the variable that holds the key (the key itself never goes in a file, log, table or metadata)",
    )
    concurrency: int = checked_field(8, check_integer(1), "requests in flight at most")
    timeout_s: float = checked_field(30.0, check_number(0, low_open=True), "the deadline of one call, in seconds")
    max_tokens: int = checked_field(
        5, check_integer(1), "the completion's token limit (a reasoning model needs thousands)"
    )
    max_retries: int = checked_field(5, check_integer(0), "retries after the first attempt")
    backoff_base_s: float = checked_field(
        0.5,
        check_number(0),
        "backoff = uniform(0, min(backoff_max_s, backoff_base_s x 2^attempt)), at least Retry-After",
    )
    backoff_max_s: float = checked_field(
        30.0, check_number(0, low_open=True), "the longest backoff, Retry-After capped to it"
    )
    breaker_threshold: int = checked_field(
        10, check_integer(1), "consecutive failed pairs that open the circuit breaker"
    )
    prices: dict = field(
        default_factory=dict,
        metadata={
            "check": check_prices,
            "doc": "[judge.prices.MODEL]: input and output USD per million tokens, for cost_usd and citegate estimate",
        },
    )
    mode: str = checked_field(
        "online",
        check_choice(JUDGE_MODES),
        "online: one call per pair; batch: the uncached pairs through the OpenAI Batch API; cascade: the screen "
        "first, the LLM (online) only on what it leaves undecided. Without base_url the screen runs alone",
    )
    batch_wait_s: float = checked_field(
        3600.0, check_number(0), "batch: how long a run polls its batches, then leaves them open for the next run"
    )
    batch_poll_s: float = checked_field(
        5.0,
        check_number(0, low_open=True),
        "batch: the first poll interval, doubled after each poll up to batch_poll_max_s",
    )
    batch_poll_max_s: float = checked_field(300.0, check_number(0, low_open=True), "batch: the longest poll interval")
    batch_max_requests: int = checked_field(
        50000, check_integer(1), "batch: request lines per batch at most (OpenAI's limit)"
    )
    batch_discount: float = checked_field(
        0.5, check_number(0, 1), "batch: the share of the online price a batch call costs (OpenAI: half)"
    )
    batch_pending_days: int = checked_field(
        7,
        check_integer(0),
        'batch: how many days before yesterday the nightly schedule looks for "batch pending" verdicts to run again '
        "(0: yesterday only)",
    )
    offline: str = checked_field(
        "screen",
        check_choice(("screen", "lexical", "heuristic")),
        "the judge when no base_url is set: screen (citegate-screen-v1, fails closed), or the three-way lexical / "
        "heuristic (with a warning that they do not fail closed)",
    )
    workers: int = checked_field(
        0,
        check_integer(0),
        "processes for the offline judge and the numeric check: 0 = one per core (at most 4), 1 = in process",
    )
    secondary: SecondaryJudgeConfig | None = field(
        default=None,
        metadata={
            "check": _secondary,
            "doc": "[judge.secondary]: a candidate judge compared on a sample (absent: no second judge)",
        },
    )
