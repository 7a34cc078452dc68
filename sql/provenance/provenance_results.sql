-- Provenance gate (SPEC section 4): one row per citation of the days [$start, $end).
-- Every comparison is between normalized texts: citations.span_normalized against
-- prompts.prompt_normalized, using the context block and chunk-body offsets stored at ingest.
insert into provenance_results
with cit as (
    select citation_id, request_id, day, surface, chunk_id, span_normalized as span, normalization_version
    from citations
    where day >= $start and day < $end
),
checked as (
    select
        cit.*,
        p.profile_status,
        p.prompt_normalized as prompt,
        coalesce(p.context_start, 0) as context_start,
        coalesce(p.context_end, 0) as context_end,
        r.chunk_id is not null as in_retrieved,
        r.text_normalized as chunk_text
    from cit
    join prompts p on p.request_id = cit.request_id and p.day >= $start and p.day < $end
    left join retrievals r
        on r.request_id = cit.request_id and r.chunk_id = cit.chunk_id and r.day >= $start and r.day < $end
),
section_hits as (
    -- the cited chunk's section(s) in the context block (a re-split chunk can have several), searched once each
    select
        ch.citation_id,
        s.truncated,
        s.body_end - s.body_start as body_chars,
        s.chunk_chars,
        s.body_start,
        strpos(substr(ch.prompt, s.body_start + 1, s.body_end - s.body_start), ch.span) as hit
    from checked ch
    join prompt_sections s
        on s.request_id = ch.request_id and s.chunk_id = ch.chunk_id and s.day >= $start and s.day < $end
),
cited_sections as (
    select
        citation_id,
        count(*) as n_sections,
        bool_and(coalesce(truncated, false)) as truncated,
        min(body_start + hit - 1) filter (where hit > 0) as body_hit,
        max(body_chars)::double / nullif(max(chunk_chars), 0) as share_in_prompt
    from section_hits
    group by citation_id
),
located as (
    select
        ch.*,
        coalesce(cs.n_sections, 0) as n_sections,
        coalesce(cs.truncated, false) as truncated,
        cs.body_hit,
        cs.share_in_prompt,
        length(ch.span) as span_len
    from checked ch
    left join cited_sections cs using (citation_id)
),
decided as (
    -- CASE evaluates a branch only for the rows that reach it: most citations need one search
    select
        *,
        case
            when profile_status <> 'ok' then 'context_not_found'
            when n_sections = 0 and not in_retrieved then 'fabricated_id'
            when n_sections = 0 then 'dropped_before_prompt'
            when span_len = 0 then 'span_missing'
            when body_hit is not null then 'ok'
            when truncated and coalesce(strpos(chunk_text, span) > 0, false) then 'span_truncated'
            when strpos(prompt, span) = 0 then 'span_missing'
            when strpos(substr(prompt, context_start + 1, context_end - context_start), span) = 0 then 'span_outside_context'
            else 'span_in_other_chunk'
        end as reason
    from located
),
placed as (
    select
        *,
        case reason
            when 'ok' then body_hit
            when 'span_in_other_chunk' then context_start + strpos(substr(prompt, context_start + 1, context_end - context_start), span) - 1
            when 'span_outside_context' then strpos(prompt, span) - 1
        end as found_start
    from decided
)
select
    citation_id,
    request_id,
    day,
    surface,
    chunk_id,
    case reason when 'ok' then 'present' when 'context_not_found' then 'unverifiable' else 'absent' end as verdict,
    reason,
    found_start,
    found_start + span_len as found_end,
    case when reason = 'span_truncated' then share_in_prompt end as chunk_share_in_prompt,
    normalization_version,
    $checked_at::timestamptz as checked_at
from placed
