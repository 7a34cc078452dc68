-- The four headline numbers per surface for the last $weeks weeks, each as value (numerator/denominator).
with weeks as (select distinct week_start from weekly_surface_metrics order by week_start desc limit $weeks)
select m.week_start, m.surface, m.metric, m.definition_version, m.numerator, m.denominator, m.value
from weekly_surface_metrics m join weeks using (week_start)
order by m.week_start, m.surface, m.metric
