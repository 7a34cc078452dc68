-- A few failing citations of the window: ids, reason and where the span was found, never their text (Dagster's
-- event log keeps metadata for good: forget and retention cannot reach it).
select citation_id, surface, reason, chunk_id, found_start, found_end, chunk_share_in_prompt
from provenance_results
where day >= $start and day < $end and reason <> 'ok'
order by citation_id
limit 10
