-- Provenance gate (docs/provenance-gate.md; SPEC section 4): one row per citation of the days [$start, $end).
-- Every comparison is between normalized texts: citations.span_normalized against
-- prompts.prompt_normalized, using the context block and chunk-body offsets stored at ingest.
-- Fast path: one search of the whole prompt per citation; if the first occurrence lies in the cited
-- chunk's section the citation is ok. Only the others (a minority) are searched section by section.
-- Run under text_store.streamed_text: joins are built as written, so the prompts come first where their text is read
-- and it streams past the citations instead of being held (lib/provenance/gate.py). Per bucket of requests ($bucket of
-- $buckets), each reading the days' text once more.
-- location_mismatch comes first: a provider-native citation whose cited text is not at the location the API
-- gave, in the body as logged (or whose location cannot be read), proves the log is not what the provider
-- read, so no other test can say what reached the model (verdict unverifiable; docs/provenance-gate.md).
-- A citation without a span (span_given false: a marker, or {chunk_id, claim}) is anchored at ingest (lib/ingest/anchors.py):
-- after the id tests it is span_truncated when its anchor sentence lies in the part of a cut chunk that never reached
-- the prompt, else ok (found_start/found_end: the anchor in the prompt, null without one). It is never searched.
insert into provenance_results
with cit as (
    select citation_id, request_id, day, surface, chunk_id, span_normalized as span, normalization_version,
           location_mismatch, coalesce(span_given, true) as span_given, anchor_start, anchor_prompt_start,
           anchor_prompt_end
    from citations
    where day >= $start and day < $end and hash(request_id) % $buckets = $bucket
),
first_hit as (
    select
        c.*,
        length(c.span) as span_len,
        strpos(p.prompt_normalized, c.span) - 1 as p1,
        p.profile_status,
        coalesce(p.context_start, 0) as context_start,
        coalesce(p.context_end, 0) as context_end
    from prompts_between($start, $end) p
    join cit c on c.request_id = p.request_id
    where hash(p.request_id) % $buckets = $bucket
),
sections as (
    -- the cited chunk's section(s) in the context block (a re-split chunk can have several)
    select
        f.citation_id,
        count(*) as n_sections,
        bool_and(coalesce(s.truncated, false)) as truncated,
        bool_or(f.p1 >= s.body_start and f.p1 + f.span_len <= s.body_end) as first_hit_in_section,
        max(s.body_end - s.body_start)::double / nullif(max(s.chunk_chars), 0) as share_in_prompt
    from first_hit f
    join prompt_sections s
        on s.request_id = f.request_id and s.chunk_id = f.chunk_id and s.day >= $start and s.day < $end
       and hash(s.request_id) % $buckets = $bucket
    group by f.citation_id
),
retrieved as (
    select request_id, chunk_id from retrievals where day >= $start and day < $end and hash(request_id) % $buckets = $bucket
    union
    -- chunks a trace named with no text (an ids-only retrieval): retrieved all the same, so absent is dropped
    select request_id, chunk_id from (
        select request_id, json_extract_string(unnest(json_extract(retrieved_left_out, '$[*]')), '$.chunk_id') as chunk_id
        from prompts
        where retrieved_left_out is not null and day >= $start and day < $end and hash(request_id) % $buckets = $bucket
    ) where chunk_id <> ''
),
located as (
    select
        f.*,
        coalesce(s.n_sections, 0) as n_sections,
        coalesce(s.truncated, false) as truncated,
        coalesce(s.first_hit_in_section, false) as fast_ok,
        s.share_in_prompt,
        r.chunk_id is not null as in_retrieved
    from first_hit f
    left join sections s using (citation_id)
    left join retrieved r on r.request_id = f.request_id and r.chunk_id = f.chunk_id
),
slow as (
    -- citations whose span is not at its first occurrence inside the cited section: search each section
    select
        l.citation_id,
        min(s.body_start + strpos(substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start), l.span) - 1)
            filter (where strpos(substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start), l.span) > 0) as body_hit,
        any_value(strpos(substr(p.prompt_normalized, l.context_start + 1, l.context_end - l.context_start), l.span) - 1) as context_hit,
        -- a retrieved text that reached the prompt whole is stored once, as its place in the prompt (schema 9)
        any_value(coalesce(strpos(coalesce(
            rt.text_normalized, substr(p.prompt_normalized, rt.prompt_start + 1, rt.prompt_end - rt.prompt_start)
        ), l.span) > 0, false)) as in_chunk_text
    from prompts_between($start, $end) p
    join located l on l.request_id = p.request_id
    left join prompt_sections s
        on s.request_id = l.request_id and s.chunk_id = l.chunk_id and s.day >= $start and s.day < $end
    left join retrievals rt
        on rt.request_id = l.request_id and rt.chunk_id = l.chunk_id and rt.day >= $start and rt.day < $end
    where l.profile_status = 'ok' and l.n_sections > 0 and l.span_len > 0 and not l.fast_ok and l.location_mismatch is null
      and hash(p.request_id) % $buckets = $bucket
    group by l.citation_id
),
decided as (
    select
        l.*,
        sl.body_hit,
        sl.context_hit,
        case
            when l.location_mismatch is not null then 'location_mismatch'
            when l.profile_status <> 'ok' then 'context_not_found'
            when l.n_sections = 0 and not l.in_retrieved then 'fabricated_id'
            when l.n_sections = 0 then 'dropped_before_prompt'
            when not l.span_given then
                case when l.anchor_start is not null and l.anchor_prompt_start is null and l.truncated
                     then 'span_truncated' else 'ok' end
            when l.span_len = 0 then 'span_missing'
            when l.fast_ok or sl.body_hit is not null then 'ok'
            when l.truncated and sl.in_chunk_text then 'span_truncated'
            when l.p1 < 0 then 'span_missing'
            when sl.context_hit < 0 then 'span_outside_context'
            else 'span_in_other_chunk'
        end as reason
    from located l
    left join slow sl using (citation_id)
),
placed as (
    select
        *,
        case
            when not span_given then case when reason = 'ok' then anchor_prompt_start end
            when reason = 'ok' then case when fast_ok then p1 else body_hit end
            when reason = 'span_in_other_chunk' then context_start + context_hit
            when reason = 'span_outside_context' then p1
        end as found_start
    from decided
)
select
    citation_id,
    request_id,
    day,
    surface,
    chunk_id,
    case reason when 'ok' then 'present' when 'context_not_found' then 'unverifiable' when 'location_mismatch' then 'unverifiable'
        else 'absent' end as verdict,
    reason,
    found_start,
    case when span_given then found_start + span_len else case when found_start is not null then anchor_prompt_end end
        end as found_end,
    case when reason = 'span_truncated' then share_in_prompt end as chunk_share_in_prompt,
    normalization_version,
    $checked_at::timestamptz as checked_at
from placed
