-- `citegate estimate`: the days of [$start, $end) the warehouse holds: citations ingested, and those the
-- provenance gate has checked (only these can be estimated: the judge sees provenance-passing citations).
select
    c.day,
    count(*) as citations,
    count(r.citation_id) as gated
from citations c
left join provenance_results r on r.citation_id = c.citation_id and r.day = c.day
where c.day >= $start and c.day < $end
group by c.day
order by c.day
