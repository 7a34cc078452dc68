-- For each support failure (registered relation failures), the other chunks of its prompt that
-- reached the context block, with their text as it stood in the prompt; $start/$end: the failures' window.
select f.citation_id, s.chunk_id, f.claim,
       substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start) as passage
from failures f
join prompt_sections s on s.request_id = f.request_id and s.day = f.day
join prompts p on p.request_id = f.request_id and p.day = f.day and p.day >= $start and p.day < $end  -- constant: only those days' text files
where s.chunk_id is not null and s.chunk_id <> f.chunk_id and s.body_end > s.body_start
qualify row_number() over (partition by f.citation_id, s.chunk_id order by s.section_no) = 1
