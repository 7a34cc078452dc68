-- name: support_pass_rate
-- version: 2
-- kind: rate
-- description: Share of judged citations the judge found supported, with every number of the claim in the passage.
-- numerator: judged citations with verdict yes and no numeric mismatch
-- denominator: judged citations with a verdict (yes, partial, no, unparseable); judge errors are excluded and counted apart (judge_errors), and so are unjudged citations (the screen left them undecided and no LLM judge is configured: support_unjudged_rate)
select
    date_trunc('week', v.day)::date as week_start,
    v.surface,
    null::varchar as breakdown,
    v.citation_id,
    v.request_id,
    case when v.verdict = 'yes' and v.numeric_ok then 1.0 else 0.0 end as numerator_weight
from support_verdicts v
where v.verdict in ('yes', 'partial', 'no', 'unparseable')
