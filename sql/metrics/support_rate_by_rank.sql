-- name: support_rate_by_rank
-- version: 1
-- kind: breakdown
-- description: support_pass_rate split by the cited chunk's retrieval rank (are low-ranked passages cited as filler?).
-- numerator: judged citations with verdict yes and no numeric mismatch, per retrieval rank
-- denominator: judged citations with a verdict (judge errors excluded), per retrieval rank ('6+' groups ranks beyond 5)
select
    date_trunc('week', v.day)::date as week_start,
    v.surface,
    case when rt.rank is null then 'unknown' when rt.rank > 5 then '6+' else rt.rank::varchar end as breakdown,
    v.citation_id,
    v.request_id,
    case when v.verdict = 'yes' and v.numeric_ok then 1.0 else 0.0 end as numerator_weight
from support_verdicts v
join citations c on c.citation_id = v.citation_id
left join retrievals rt on rt.request_id = c.request_id and rt.chunk_id = c.chunk_id
where v.verdict in ('yes', 'partial', 'no', 'unparseable')
