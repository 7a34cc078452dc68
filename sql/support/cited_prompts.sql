-- The normalized text of the window's prompts that hold a cited passage (request ids registered as cited_requests
-- by lib/passages.py), read once and streamed in batches.
select p.request_id, p.prompt_normalized
from prompts p
where p.day >= $start and p.day < $end and p.request_id in (select request_id from cited_requests)
