-- A full recompute rebuilds every metric table over all weeks: empty them first (in the caller's transaction).
delete from metric_lineage;
delete from weekly_surface_metrics;
delete from weekly_breakdowns;
delete from metric_week_inputs;
