-- name: queue_volume_by_reason
-- version: 1
-- kind: count
-- description: Queue entries per reason, by the week of the cited answer: the volume reviewers face, and what escalations should bring down.
-- numerator: queue entries with this reason (the value is this count)
-- denominator: none (a count, not a rate)
select
    date_trunc('week', q.day)::date as week_start,
    q.surface,
    q.reason as breakdown,
    q.citation_id,
    q.request_id,
    1.0 as numerator_weight
from citation_queue q
