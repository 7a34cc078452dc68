-- For each support failure (registered relation failures), the other chunks of its prompt that
-- reached the context block, with their text as it stood in the prompt; $start/$end: the failures' window.
-- Run under text_store.streamed_text (lib/provenance/passages.py other_passages): the sections are picked first, with no text,
-- and the prompts come first in the last join, so their text streams past the picked sections instead of being held.
with picked as (
    select f.citation_id, f.request_id, f.day, f.claim, s.chunk_id, s.body_start, s.body_end
    from failures f
    join prompt_sections s on s.request_id = f.request_id and s.day = f.day
    where s.chunk_id is not null and s.chunk_id <> f.chunk_id and s.body_end > s.body_start
      and s.day >= $start and s.day < $end
    qualify row_number() over (partition by f.citation_id, s.chunk_id order by s.section_no) = 1
)
select k.citation_id, k.chunk_id, k.claim,
       substr(p.prompt_normalized, k.body_start + 1, k.body_end - k.body_start) as passage
from prompts_between($start, $end) p
join picked k on k.request_id = p.request_id and k.day = p.day
