-- name: support_unjudged_rate
-- version: 1
-- kind: rate
-- description: Share of the citations selected for judging that no judge decided: the screen left them undecided and no LLM judge is configured. They are never a pass and are queued as support_unjudged; support_pass_rate leaves them out of its numerator and its denominator, end_to_end_pass_rate counts them as not passing. With an LLM judge configured no citation is unjudged.
-- numerator: selected citations whose verdict is unjudged
-- denominator: citations selected for judging (every support verdict, judge errors included)
select
    date_trunc('week', v.day)::date as week_start,
    v.surface,
    null::varchar as breakdown,
    v.citation_id,
    v.request_id,
    case when v.verdict = 'unjudged' then 1.0 else 0.0 end as numerator_weight
from support_verdicts v
