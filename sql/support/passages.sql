-- Provenance-passing citations of [$start, $end) with the passage as it reached the prompt (the
-- cited section's body that holds the span) and the claim, both normalized. One bucket of requests
-- at a time ($bucket of $buckets): the prompt text of a whole day does not fit a join's memory.
select
    r.citation_id, r.request_id, r.day, r.surface, c.answer_model,
    c.claim_normalized as claim,
    substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start) as passage,
    coalesce(ss.selected, false) as selected
from provenance_results r
join citations c on c.citation_id = r.citation_id
join prompts p on p.request_id = r.request_id and p.day >= $start and p.day < $end and hash(p.request_id) % $buckets = $bucket
join prompt_sections s
    on s.request_id = r.request_id and s.chunk_id = r.chunk_id and s.day >= $start and s.day < $end
   and r.found_start >= s.body_start and r.found_end <= s.body_end
left join support_sample ss on ss.citation_id = r.citation_id and ss.day >= $start and ss.day < $end
where r.day >= $start and r.day < $end and r.reason = 'ok' and c.day >= $start and c.day < $end
  and hash(r.request_id) % $buckets = $bucket
qualify row_number() over (partition by r.citation_id order by s.section_no) = 1
