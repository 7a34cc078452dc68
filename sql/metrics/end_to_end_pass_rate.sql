-- name: end_to_end_pass_rate
-- version: 2
-- kind: rate
-- description: Share of all citations that pass both gates. Where support was sampled, each provenance-passing citation that was not judged (sampled out, stakes off, or a judge error) and has no numeric mismatch counts at the judged pass rate of its surface and week; with no judged citation that week the rate is NULL, never a guess. An unjudged citation (selected, but the screen left it undecided and no LLM judge is configured) is never a pass: it counts 0, and it counts as not passing in the judged pass rate the others are weighted at, so the estimate is a lower bound when some are unjudged.
-- numerator: citations with provenance ok, no numeric mismatch and judge verdict yes, plus the ones not selected for judging or whose judge failed, weighted at the surface-week's judged pass rate (yes over yes, partial, no, unparseable and unjudged)
-- denominator: all citations checked by the provenance gate
with base as (
    select
        date_trunc('week', r.day)::date as week_start, r.surface, r.citation_id, r.request_id, r.reason,
        n.numeric_ok, v.verdict
    from provenance_results r
    left join numeric_checks n on n.citation_id = r.citation_id
    left join support_verdicts v on v.citation_id = r.citation_id
),
judged_rate as (
    select week_start, surface, avg(case when verdict = 'yes' and numeric_ok then 1.0 else 0.0 end) as rate
    from base
    where verdict in ('yes', 'partial', 'no', 'unparseable', 'unjudged')
    group by week_start, surface
)
select
    b.week_start,
    b.surface,
    null::varchar as breakdown,
    b.citation_id,
    b.request_id,
    case
        when b.reason <> 'ok' then 0.0
        when not coalesce(b.numeric_ok, false) then 0.0
        when b.verdict in ('yes', 'partial', 'no', 'unparseable', 'unjudged') then case when b.verdict = 'yes' then 1.0 else 0.0 end
        else j.rate
    end as numerator_weight
from base b
left join judged_rate j on j.week_start = b.week_start and j.surface = b.surface
