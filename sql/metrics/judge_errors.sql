-- name: judge_errors
-- version: 1
-- kind: breakdown
-- description: Judge calls that failed after their retries (never a pass; retried on the next run), as a share of citations selected for judging, per judge model.
-- numerator: selected citations whose verdict is error
-- denominator: citations selected for judging
select
    date_trunc('week', v.day)::date as week_start,
    v.surface,
    v.judge_model as breakdown,
    v.citation_id,
    v.request_id,
    case when v.verdict = 'error' then 1.0 else 0.0 end as numerator_weight
from support_verdicts v
