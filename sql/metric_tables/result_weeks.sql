-- Weeks that have metric rows or recorded inputs: a week whose inputs are gone must lose its rows too.
select week_start from metric_week_inputs
union
select week_start from weekly_surface_metrics
union
select week_start from weekly_breakdowns
