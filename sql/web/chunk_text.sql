-- One chunk of a prompt: its text as it stood in the prompt (the first section holding it, null when it never
-- reached the prompt) and as retrieved (null when not retrieved); both normalized.
select
    (select substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start)
     from prompt_sections s join prompts p on p.request_id = s.request_id and p.day = s.day
     where s.request_id = $request_id and s.day = $day and s.chunk_id = $chunk_id
     order by s.section_no limit 1) as in_prompt,
    (select coalesce(r.text_normalized, substr(p.prompt_normalized, r.prompt_start + 1, r.prompt_end - r.prompt_start))
     from retrievals r left join prompts p on p.request_id = r.request_id and p.day = r.day
     where r.request_id = $request_id and r.day = $day and r.chunk_id = $chunk_id
     order by r.position limit 1) as retrieved
