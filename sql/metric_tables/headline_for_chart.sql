-- The four headline rates, long format, for the chart and the latest-week table.
select week_start, surface, metric, value from weekly_surface_metrics order by surface, week_start, metric
