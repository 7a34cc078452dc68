-- How many metric definitions the warehouse holds (metric_definitions writes them); the weekly tables join them.
select count(*) from metric_definitions
