-- From one metric cell to the citations and prompts behind it (edit the three values).
-- The rows listed here are exactly those counted: count(*) = denominator, sum(numerator_weight) = numerator.
select l.citation_id, l.numerator_weight, c.claim, r.reason, p.request_id, p.prompt_sha256, p.source_file, p.source_line
from metric_lineage l
join citations c on c.citation_id = l.citation_id
join provenance_results r on r.citation_id = l.citation_id
join prompts p on p.request_id = l.request_id
where l.metric = 'provenance_pass_rate'
  and l.surface = 'billing-assistant'
  and l.week_start = date '2026-11-09'
  and l.breakdown is null
order by l.numerator_weight, l.citation_id
