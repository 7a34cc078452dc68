-- The first $per_stratum provenance-passing citations of each stratum (surface x support verdict, as in
-- citation_strata.sql) in the sample's order: 52 bits of sha256 over the seeded salt and the citation id, so the
-- order is the same on every machine and a larger sample extends a smaller one.
with stratum as (
    select r.citation_id, r.day, r.surface, coalesce(v.verdict, 'not_judged') as verdict
    from provenance_results r
    left join (
        -- a citation's latest verdict (one row a day per citation; the latest, should a day hold two)
        select citation_id, day, arg_max(verdict, judged_at) as verdict from support_verdicts group by all
    ) v on v.citation_id = r.citation_id and v.day = r.day
    where r.reason = 'ok'
)
select citation_id, day, surface, verdict, left(sha256($salt || citation_id), 13) as order_key
from stratum
qualify row_number() over (partition by surface, verdict order by order_key, citation_id) <= $per_stratum
order by surface, verdict, order_key, citation_id
