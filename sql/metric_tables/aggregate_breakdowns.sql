-- The weekly breakdowns (rates per chunking strategy, rank, judge model, answer model; counts per queue reason).
insert into weekly_breakdowns
select
    l.week_start, l.surface, l.metric, l.breakdown, l.definition_version,
    case when count(*) filter (where l.numerator_weight is null) > 0 then null else sum(l.numerator_weight) end as numerator,
    case when any_value(d.kind) = 'count' then null else count(*) end as denominator,
    case
        when count(*) filter (where l.numerator_weight is null) > 0 then null
        when any_value(d.kind) = 'count' then sum(l.numerator_weight)
        else sum(l.numerator_weight) / count(*)
    end as value,
    $now::timestamptz as computed_at
from metric_lineage l
join metric_definitions d on d.name = l.metric and d.version = l.definition_version
where d.kind in ('breakdown', 'count')
group by l.week_start, l.surface, l.metric, l.breakdown, l.definition_version
