-- Denominators that do not reconcile with the upstream tables they count, per (week, surface).
-- Only gated days count: the days the provenance gate ran on (its daily partitions). Ingest reads every
-- landing file, so citations of a day not gated yet (today's, at the 02:00 run) are stored but in no
-- metric until their partition runs; a gated day whose citations lack provenance rows still fails.
with m as (
    select week_start, surface, metric, denominator from weekly_surface_metrics
),
gated_citations as (
    select day, surface from citations where day in (select distinct day from provenance_results)
),
upstream as (
    select date_trunc('week', day)::date as week_start, surface, 'provenance_pass_rate' as metric, count(*) as expected
    from gated_citations group by all
    union all
    select date_trunc('week', day)::date, surface, 'end_to_end_pass_rate', count(*) from gated_citations group by all
    union all
    select date_trunc('week', day)::date, surface, 'support_pass_rate', count(*) from support_verdicts
    where verdict not in ('error', 'unjudged') group by all
    union all
    select date_trunc('week', day)::date, surface, 'support_unjudged_rate', count(*) from support_verdicts group by all
    union all
    select date_trunc('week', q.day)::date, q.surface, 'queue_repair_rate', count(*)
    from citation_queue q join review_outcomes o on o.citation_id = q.citation_id and o.is_latest group by all
)
select coalesce(m.week_start, u.week_start) as week_start, coalesce(m.surface, u.surface) as surface,
       coalesce(m.metric, u.metric) as metric, coalesce(m.denominator, 0) as denominator, coalesce(u.expected, 0) as expected
from m full join upstream u on u.week_start = m.week_start and u.surface = m.surface and u.metric = m.metric
where coalesce(m.denominator, 0) <> coalesce(u.expected, 0)
