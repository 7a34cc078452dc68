-- What `citegate trace` can show for one surface and week: each metric with its breakdown values
-- (one row with a null breakdown for a headline metric).
select metric, breakdown from (
    select metric, null::varchar as breakdown, surface, week_start from weekly_surface_metrics
    union all
    select metric, breakdown, surface, week_start from weekly_breakdowns
)
where surface = $surface and week_start = $week
group by metric, breakdown
order by metric, breakdown
