-- Cached verdicts for the wanted keys (registered relation wanted_keys).
select c.cache_key, c.judge_model, c.template_version, c.verdict, c.raw_answer, c.latency_ms,
       c.prompt_tokens, c.completion_tokens, c.cost_usd, 0 as attempts, c.judged_at
from judge_cache c
join wanted_keys w on w.cache_key = c.cache_key
qualify row_number() over (partition by c.cache_key order by c.judged_at) = 1
