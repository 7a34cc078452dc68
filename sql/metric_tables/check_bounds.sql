-- Rates outside [0, 1], negative numerators, numerators above their denominators.
select 'weekly_surface_metrics' as tbl, week_start, surface, metric, null as breakdown, numerator, denominator, value
from weekly_surface_metrics
where value < 0 or value > 1 or numerator < 0 or numerator > denominator
union all
select 'weekly_breakdowns', b.week_start, b.surface, b.metric, b.breakdown, b.numerator, b.denominator, b.value
from weekly_breakdowns b
where b.denominator is not null and (b.value < 0 or b.value > 1 or b.numerator < 0 or b.numerator > b.denominator)
