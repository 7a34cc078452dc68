-- The four headline rates, long format, for the chart and the latest-week table; numerator and denominator
-- let the chart rank surfaces by citations and pool the rest into one "other" line.
select week_start, surface, metric, value, numerator, denominator from weekly_surface_metrics order by surface, week_start, metric
