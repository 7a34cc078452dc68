-- The labelled citations (registered relation label_citations: citation_id) that are provenance-passing citations of
-- this warehouse, with their day and stratum now (as in citation_strata.sql): an own label's weight is its stratum's.
with stratum as (
    select r.citation_id, r.day, r.surface, coalesce(v.verdict, 'not_judged') as verdict
    from provenance_results r
    left join support_verdicts v on v.citation_id = r.citation_id and v.day = r.day
    where r.reason = 'ok' and r.citation_id in (select citation_id from label_citations)
    qualify row_number() over (partition by r.citation_id order by v.judged_at desc nulls last) = 1
)
select citation_id, day, surface as stratum_surface, verdict as stratum_verdict from stratum
