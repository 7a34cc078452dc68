-- What each week's metrics are computed from, one fingerprint per week (lib/metrics/preregistered.py): the row
-- count and latest write of every day table a definition reads, and the review decisions in force. Only
-- the day and timestamp columns are read. A week is recomputed when its fingerprint changes.
with parts as (
    select date_trunc('week', day)::date as week_start, 'provenance_results' as source, count(*) as n,
           max(checked_at)::varchar as stamp
    from provenance_results group by all
    union all
    select date_trunc('week', day)::date, 'numeric_checks', count(*), max(checked_at)::varchar
    from numeric_checks group by all
    union all
    select date_trunc('week', day)::date, 'support_verdicts', count(*), max(judged_at)::varchar
    from support_verdicts group by all
    union all
    select date_trunc('week', day)::date, 'citation_queue', count(*), max(queued_at)::varchar
    from citation_queue group by all
    union all
    select date_trunc('week', day)::date, 'citations', count(*), null from citations group by all
    union all
    select date_trunc('week', day)::date, 'retrievals', count(*), null from retrievals group by all
    union all
    -- a review decision on an old week changes that week (queue_repair_rate)
    select date_trunc('week', q.day)::date, 'review_outcomes', count(*), bit_xor(hash(o.review_id, o.outcome))::varchar
    from citation_queue q join review_outcomes o on o.citation_id = q.citation_id and o.is_latest
    group by all
)
select week_start, md5(string_agg(source || ':' || n || ':' || coalesce(stamp, ''), '|' order by source)) as fingerprint
from parts
group by week_start
order by week_start
