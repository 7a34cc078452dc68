-- A few failing citations of the window with their reason and claim.
select r.citation_id, r.surface, r.reason, r.chunk_id, left(c.span, 60) as span
from provenance_results r join citations c using (citation_id)
where r.day >= $start and r.day < $end and r.reason <> 'ok'
order by r.citation_id
limit 10
