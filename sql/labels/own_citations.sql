-- The labelled citations (registered relation label_citations: citation_id) that are provenance-passing citations of
-- this warehouse, with their day and stratum now (as in citation_strata.sql): an own label's weight is its stratum's.
select r.citation_id, r.day, r.surface as stratum_surface, coalesce(v.verdict, 'not_judged') as stratum_verdict
from provenance_results r
left join (
    -- a citation's latest verdict (one row a day per citation; the latest, should a day hold two)
    select citation_id, day, arg_max(verdict, judged_at) as verdict from support_verdicts group by all
) v on v.citation_id = r.citation_id and v.day = r.day
where r.reason = 'ok' and r.citation_id in (select citation_id from label_citations)
