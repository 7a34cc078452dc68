-- Which of the batch's request ids are already in the immutable prompt log, and with what prompt.
select p.request_id, p.prompt_sha256, p.source_file || ':' || p.source_line as existing_source
from prompts p
join batch_keys k on k.request_id = p.request_id
