-- Provenance-passing citations of [$start, $end) that fail support: the judge said partial, no or
-- something unparseable, or the claim has a number the passage lacks (judged or not).
select
    n.citation_id, n.request_id, n.day, n.surface, c.chunk_id, c.claim_normalized as claim,
    v.verdict as cited_verdict, n.numeric_ok as cited_numeric_ok
from numeric_checks n
join citations c on c.citation_id = n.citation_id and c.day >= $start and c.day < $end
left join support_verdicts v on v.citation_id = n.citation_id and v.day >= $start and v.day < $end
where n.day >= $start and n.day < $end
  and (not n.numeric_ok or v.verdict in ('partial', 'no', 'unparseable'))
