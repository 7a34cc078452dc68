-- Schema 8 -> 9: each retrieved text stored once. Its normalized form is stored only where it is not
-- already in the prompt: where it equals the body of the first section holding that chunk, text_normalized is null
-- and [prompt_start, prompt_end) locates it in prompts.prompt_normalized (readers coalesce with that substring).
alter table retrievals add column if not exists prompt_start integer;
alter table retrievals add column if not exists prompt_end integer;
alter table retrievals alter column text_normalized drop not null;
update retrievals as r
set prompt_start = f.body_start, prompt_end = f.body_end, text_normalized = null
from (
    select s.request_id, s.day, s.chunk_id, s.body_start, s.body_end,
        substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start) as body
    from prompt_sections s
    join prompts p on p.request_id = s.request_id and p.day = s.day
    where s.chunk_id is not null
    qualify row_number() over (partition by s.request_id, s.chunk_id order by s.section_no) = 1
) f
where f.request_id = r.request_id and f.day = r.day and f.chunk_id = r.chunk_id and f.body = r.text_normalized;
