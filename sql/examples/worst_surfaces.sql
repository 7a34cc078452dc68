-- Surfaces ranked by end-to-end pass rate in the latest week, with the other three numbers beside it.
with latest as (select max(week_start) as week_start from weekly_surface_metrics)
pivot (
    select m.surface, m.metric, round(m.value, 3) as value
    from weekly_surface_metrics m join latest using (week_start)
)
on metric in ('end_to_end_pass_rate', 'provenance_pass_rate', 'support_pass_rate', 'queue_repair_rate')
using any_value(value)
order by end_to_end_pass_rate asc nulls first
