-- Every provenance-passing citation with its labelling stratum: its surface and its support verdict (`not_judged`
-- when the support gate did not judge it). The traffic the own-label sample is drawn from and weighted back to.
select r.citation_id, r.day, r.surface, coalesce(v.verdict, 'not_judged') as verdict
from provenance_results r
left join (
    -- a citation's latest verdict (one row a day per citation; the latest, should a day hold two)
    select citation_id, day, arg_max(verdict, judged_at) as verdict from support_verdicts group by all
) v on v.citation_id = r.citation_id and v.day = r.day
where r.reason = 'ok'
