-- name: provenance_pass_rate
-- version: 1
-- kind: rate
-- description: Share of citations whose cited span sat inside the cited chunk's section of the prompt as sent.
-- numerator: citations with provenance reason ok
-- denominator: citations checked by the provenance gate (every citation of every ingested answer), by the UTC week of logged_at
select
    date_trunc('week', r.day)::date as week_start,
    r.surface,
    null::varchar as breakdown,
    r.citation_id,
    r.request_id,
    case when r.reason = 'ok' then 1.0 else 0.0 end as numerator_weight
from provenance_results r
