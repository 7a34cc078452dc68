-- Failing citations by reason and surface, with the share of each surface's citations.
select surface, reason, count(*) as citations,
       round(100.0 * count(*) / sum(count(*)) over (partition by surface), 1) as pct_of_surface
from provenance_results
group by surface, reason
having reason <> 'ok'
order by surface, citations desc
