-- The seed's warning: end-to-end pass rate up while the queue repair rate is down, week over week, per surface.
with w as (
    select surface, week_start,
           max(value) filter (where metric = 'end_to_end_pass_rate') as e2e,
           max(value) filter (where metric = 'queue_repair_rate') as repair
    from weekly_surface_metrics group by surface, week_start
),
d as (
    select surface, week_start, e2e, repair,
           lag(e2e) over (partition by surface order by week_start) as prev_e2e,
           lag(repair) over (partition by surface order by week_start) as prev_repair
    from w
)
select surface, week_start, prev_e2e, e2e, prev_repair, repair
from d where e2e > prev_e2e and repair < prev_repair
order by surface, week_start
