-- Counts of the rows behind one metric cell (they must equal the cell's numbers).
select count(*) as denominator_rows, sum(numerator_weight) as numerator_sum,
       count(*) filter (where numerator_weight > 0) as numerator_rows, count(distinct request_id) as prompts
from metric_lineage
where metric = $metric and surface = $surface and week_start = $week
  and (($breakdown is null and breakdown is null) or breakdown = $breakdown)
