-- Every provenance-passing citation with its labelling stratum: its surface and its support verdict (`not_judged`
-- when the support gate did not judge it). The traffic the own-label sample is drawn from and weighted back to.
select r.citation_id, r.day, r.surface, coalesce(v.verdict, 'not_judged') as verdict
from provenance_results r
left join support_verdicts v on v.citation_id = r.citation_id and v.day = r.day
where r.reason = 'ok'
qualify row_number() over (partition by r.citation_id order by v.judged_at desc nulls last) = 1
