-- A few prompts of the window, without their (large) text. Run under text_store.streamed_text: the lengths are read
-- from the streamed text, and only the ten kept rows are held.
select request_id, day::varchar as day, surface, template, prompt_encoding, profile_status, n_sections,
       length(prompt_raw) as raw_chars, left(prompt_sha256, 12) as sha256
from prompts_between($start, $end)
order by logged_at
limit 10
