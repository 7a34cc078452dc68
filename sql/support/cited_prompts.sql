-- The normalized text of the window's prompts that hold a cited passage (request ids registered as cited_requests
-- by lib/provenance/passages.py), read once and streamed in batches.
select p.request_id, p.prompt_normalized
from prompts_between($start, $end) p  -- text_store.streamed_text: the text streamed, not held
where p.request_id in (select request_id from cited_requests)
