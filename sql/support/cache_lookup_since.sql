-- Cached verdicts for the wanted keys stored since $since (another run's, side by side with this one): judged_at
-- rises as rows are appended, so the scan skips the row groups of older days (cache_lookup.sql reads them all).
select c.cache_key, c.judge_model, c.template_version, c.verdict, c.raw_answer, c.latency_ms,
       c.prompt_tokens, c.completion_tokens, c.cost_usd, 0 as attempts, c.judged_at
from judge_cache c
join wanted_keys w on w.cache_key = c.cache_key
where c.judged_at >= $since
qualify row_number() over (partition by c.cache_key order by c.judged_at) = 1
