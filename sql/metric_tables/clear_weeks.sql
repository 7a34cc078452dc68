-- Empty the metric tables for the weeks being recomputed (temp table touched_weeks; the caller's transaction).
delete from metric_lineage where week_start in (select week_start from touched_weeks);
delete from weekly_surface_metrics where week_start in (select week_start from touched_weeks);
delete from weekly_breakdowns where week_start in (select week_start from touched_weeks);
delete from metric_week_inputs where week_start in (select week_start from touched_weeks)
