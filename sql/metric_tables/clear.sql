-- Every metric table is rebuilt nightly over all weeks: empty them first (in the caller's transaction).
delete from metric_lineage;
delete from weekly_surface_metrics;
delete from weekly_breakdowns;
