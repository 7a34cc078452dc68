-- The citations behind one metric cell: every denominator member, its numerator weight, and its prompt.
select l.citation_id, l.request_id, l.numerator_weight, p.prompt_sha256, p.source_file, p.source_line, p.logged_at
from metric_lineage l
join prompts p on p.request_id = l.request_id
where l.metric = $metric and l.surface = $surface and l.week_start = $week
  and (($breakdown is null and l.breakdown is null) or l.breakdown = $breakdown)
order by l.numerator_weight desc, l.citation_id
