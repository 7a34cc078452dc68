-- A week whose rows of one metric come from more than one definition version.
select week_start, metric, list(distinct definition_version order by definition_version) as versions
from (select week_start, metric, definition_version from weekly_surface_metrics
      union all select week_start, metric, definition_version from weekly_breakdowns)
group by week_start, metric
having count(distinct definition_version) > 1
