-- One queue entry with its prompt's normalized text and the profile that read the prompt.
select q.*, p.prompt_normalized, p.template, p.profile_status
from citation_queue q join prompts p on p.request_id = q.request_id and p.day = q.day
where q.citation_id = $citation_id
