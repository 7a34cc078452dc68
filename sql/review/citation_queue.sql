-- The review queue for [$start, $end): one row per citation that fails either gate, with everything a
-- reviewer needs. Owner: the reason's (registered relation queue_owners), else the surface's (registered relation
-- surface_policies, which lib/support/policies.py resolves for every surface of the days). Run under
-- text_store.streamed_text: joins are built as written, so the prompts come first in the last one and their text
-- streams past the failures instead of being held.
insert into citation_queue
with cited as (
    select
        r.citation_id, r.request_id, r.day, r.surface, r.chunk_id, r.verdict as provenance_verdict,
        r.reason as provenance_reason, r.found_start, r.found_end, r.chunk_share_in_prompt,
        c.claim, c.span, c.origin, c.cited_as, coalesce(c.span_given, true) as span_given, c.anchor_start,
        c.anchor_end,
        v.verdict as support_verdict, v.raw_answer as judge_raw_answer, v.judge_model,
        n.numeric_ok, n.missing_quantities,
        b.cause as best_evidence_cause, b.better_chunk_id,
        case
            when r.reason <> 'ok' then r.reason
            when v.verdict = 'unparseable' then 'judge_unparseable'
            when v.verdict = 'no' then 'support_no'
            when v.verdict = 'partial' then 'support_partial'
            when not n.numeric_ok then 'numeric_mismatch'
            -- the screen left it undecided and no LLM judge is configured: not a failure found, never a pass either
            when v.verdict = 'unjudged' then 'support_unjudged'
        end as reason
    from provenance_results r
    join citations c on c.citation_id = r.citation_id and c.day >= $start and c.day < $end
    left join support_verdicts v on v.citation_id = r.citation_id and v.day >= $start and v.day < $end
    left join numeric_checks n on n.citation_id = r.citation_id and n.day >= $start and n.day < $end
    left join best_evidence b on b.citation_id = r.citation_id and b.day >= $start and b.day < $end
    where r.day >= $start and r.day < $end
),
failing as (select * from cited where reason is not null),
section as (
    -- the cited chunk's section: the one holding the span if any, else the first
    select f.citation_id, s.body_start, s.body_end
    from failing f
    join prompt_sections s on s.request_id = f.request_id and s.chunk_id = f.chunk_id and s.day >= $start and s.day < $end
    qualify row_number() over (
        partition by f.citation_id
        order by (f.found_start is not null and f.found_start >= s.body_start and f.found_start < s.body_end) desc, s.section_no
    ) = 1
)
select
    f.citation_id, f.request_id, f.day, f.surface, f.reason,
    case when f.provenance_reason = 'ok' then 'support' else 'provenance' end as gate,
    coalesce(o.owner, sp.owner) as owner,
    f.claim, f.chunk_id, f.span,
    coalesce(
        substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start),
        rt.text_normalized,
        substr(p.prompt_normalized, rt.prompt_start + 1, rt.prompt_end - rt.prompt_start)  -- stored once (schema 9)
    ) as passage,
    case when s.citation_id is not null then 'prompt' when rt.chunk_id is not null then 'retrieved' else 'none' end as passage_source,
    f.provenance_verdict, f.provenance_reason, f.chunk_share_in_prompt,
    f.support_verdict, f.judge_raw_answer, f.judge_model, f.numeric_ok, f.missing_quantities,
    f.best_evidence_cause, f.better_chunk_id,
    p.prompt_sha256, p.source_file, p.source_line,
    f.found_start, f.found_end, s.body_start as section_start, s.body_end as section_end,
    p.context_start, p.context_end,
    case l.outcome when 'accept' then 'accepted' when 'repair' then 'repaired' when 'escalate' then 'escalated' else 'open' end as status,
    case when l.outcome = 'escalate' then l.cause end as escalation_cause,
    l.reviewer as reviewed_by, l.reviewed_at,
    $now::timestamptz as queued_at,
    f.origin, f.cited_as, f.span_given,
    substr(
        coalesce(rt.text_normalized, substr(p.prompt_normalized, rt.prompt_start + 1, rt.prompt_end - rt.prompt_start)),
        f.anchor_start + 1, f.anchor_end - f.anchor_start
    ) as anchor,
    f.anchor_start, f.anchor_end
from prompts_between($start, $end) p
join failing f on f.request_id = p.request_id
left join section s on s.citation_id = f.citation_id
left join retrievals rt on rt.request_id = f.request_id and rt.chunk_id = f.chunk_id and rt.day >= $start and rt.day < $end
left join queue_owners o on o.reason = f.reason
left join surface_policies sp on sp.surface = f.surface
left join review_outcomes l on l.citation_id = f.citation_id and l.is_latest
