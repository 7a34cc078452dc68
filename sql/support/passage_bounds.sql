-- Provenance-passing citations of [$start, $end) and where their passage sits in the prompt: the body of the first
-- cited section that holds where the found span (or a span-less citation's anchor) starts, else, for a span-less
-- citation with no anchor, its first section; as [body_start, body_end) of prompt_normalized
-- (lib/anchors.passage_section_index). No text but the claim:
-- lib/provenance/passages.py cuts the passages out of the window's prompts in one streamed pass. $selected_only: only the
-- citations the support sample selected for the judge.
select
    r.citation_id, r.request_id, r.day, r.surface, c.answer_model,
    c.claim_normalized as claim,
    s.body_start, s.body_end,
    coalesce(ss.selected, false) as selected
from provenance_results r
join citations c on c.citation_id = r.citation_id
join prompt_sections s
    on s.request_id = r.request_id and s.chunk_id = r.chunk_id and s.day >= $start and s.day < $end
   and (r.found_start is null or (r.found_start >= s.body_start and r.found_start < s.body_end))
left join support_sample ss on ss.citation_id = r.citation_id and ss.day >= $start and ss.day < $end
where r.day >= $start and r.day < $end and r.reason = 'ok' and c.day >= $start and c.day < $end
  and (not $selected_only or coalesce(ss.selected, false))
qualify row_number() over (partition by r.citation_id order by s.section_no) = 1
