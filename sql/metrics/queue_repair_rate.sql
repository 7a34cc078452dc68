-- name: queue_repair_rate
-- version: 1
-- kind: rate
-- description: Share of reviewed queue entries whose answer had to be repaired, by the week of the cited answer. Read with end_to_end_pass_rate: a rising pass rate with a falling repair rate is a warning, not a win.
-- numerator: queue entries whose latest review outcome is repair
-- denominator: queue entries with a review outcome (accept, repair or escalate)
select
    date_trunc('week', q.day)::date as week_start,
    q.surface,
    null::varchar as breakdown,
    q.citation_id,
    q.request_id,
    case when o.outcome = 'repair' then 1.0 else 0.0 end as numerator_weight
from citation_queue q
join review_outcomes o on o.citation_id = q.citation_id and o.is_latest
