-- The headline rates for every (week, surface) that has citations: sums over metric_lineage.
-- A cell with no members has denominator 0 and value NULL, never 0.
insert into weekly_surface_metrics
with grid as (
    select distinct date_trunc('week', day)::date as week_start, surface from provenance_results
),
defs as (select name as metric, version from metric_definitions where kind = 'rate'),
agg as (
    select metric, week_start, surface, count(*) as denominator,
           case when count(*) filter (where numerator_weight is null) > 0 then null else sum(numerator_weight) end as numerator
    from metric_lineage
    where breakdown is null
    group by metric, week_start, surface
)
select
    g.week_start, g.surface, d.metric, d.version as definition_version,
    case when a.metric is null then 0.0 else a.numerator end as numerator,
    coalesce(a.denominator, 0) as denominator,
    case when coalesce(a.denominator, 0) = 0 then null else a.numerator / a.denominator end as value,
    $now::timestamptz as computed_at
from grid g
cross join defs d
left join agg a on a.metric = d.metric and a.week_start = g.week_start and a.surface = g.surface
