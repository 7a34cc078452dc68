-- Provenance reasons per surface for the days [$start, $end).
select surface, reason, count(*) as citations,
       round(count(*) / sum(count(*)) over (partition by surface), 4) as share
from provenance_results
where day >= $start and day < $end
group by surface, reason
order by surface, citations desc
