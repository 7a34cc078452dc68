-- The pair each wanted citation (registered relation wanted_citations: citation_id, day) puts to the judge: its claim
-- and the body of the first cited section that holds where the found span or anchor starts (a span-less citation
-- with no anchor: the first section), as it stood in the prompt (both normalized; the same cut as lib/provenance/passages.py).
-- Null text: removed by retention or forget.
select w.citation_id, c.claim_normalized as claim,
       substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start) as passage
from wanted_citations w
join provenance_results r on r.citation_id = w.citation_id and r.day = w.day
join citations c on c.citation_id = r.citation_id and c.day = r.day
join prompt_sections s
    on s.request_id = r.request_id and s.chunk_id = r.chunk_id and s.day = r.day
   and (r.found_start is null or (r.found_start >= s.body_start and r.found_start < s.body_end))
left join prompts p on p.request_id = r.request_id and p.day = r.day
where r.reason = 'ok'
qualify row_number() over (partition by w.citation_id order by s.section_no) = 1
