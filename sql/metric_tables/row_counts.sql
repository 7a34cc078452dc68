-- Rows of the two tables weekly_metrics writes besides weekly_surface_metrics.
select (select count(*) from weekly_breakdowns) as weekly_breakdowns,
       (select count(*) from metric_lineage) as metric_lineage
