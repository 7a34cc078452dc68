-- Judged citations a week per surface (support_gate_status.judged_per_week): the verdicts other than `error` of the
-- last $window_days UTC days the warehouse holds verdicts for (ending at the latest judged day, any surface),
-- times 7, over the days in that window (fewer when the first judged day is later). Every judge model counts: the
-- volume is the surface's traffic and sampling, not the judge's. No row at all when nothing was ever judged.
with bounds as (
    select max(day) as last_day, min(day) as first_day from support_verdicts
),
window_days as (
    select last_day - $window_days + 1 as since,
           least($window_days, last_day - first_day + 1) as days
    from bounds where last_day is not null
)
select v.surface,
       count(*) filter (where v.verdict <> 'error') * 7.0 / any_value(w.days) as judged_per_week,
       -- the share of them the judge called yes: set beside 1 - false_fail_rate, a check on the labels (a judge that
       -- passes 9% of a surface's citations with a false fail rate of 22% means at most 12% of them are supported)
       count(*) filter (where v.verdict = 'yes') / nullif(count(*) filter (where v.verdict <> 'error'), 0)
           as judged_yes_rate
from support_verdicts v, window_days w
where v.day >= w.since
group by v.surface
order by v.surface
