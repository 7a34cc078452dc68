-- A few prompts of the window, without their (large) text.
select request_id, day::varchar as day, surface, template, prompt_encoding, profile_status, n_sections,
       length(prompt_raw) as raw_chars, left(prompt_sha256, 12) as sha256
from prompts where day >= $start and day < $end
order by logged_at
limit 10
