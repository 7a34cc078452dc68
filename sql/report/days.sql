-- Per UTC day of the warehouse: prompts ingested, their citations, and the citations the provenance gate
-- checked (a day is gated once a run's partition range covers it; later days are ingested, not yet gated).
with p as (select day, count(*) as prompts from prompts group by day),
c as (select day, count(*) as citations from citations group by day),
r as (select day, count(*) as gated from provenance_results group by day)
select p.day, p.prompts, coalesce(c.citations, 0) as citations, coalesce(r.gated, 0) as citations_gated
from p left join c using (day) left join r using (day)
order by p.day
