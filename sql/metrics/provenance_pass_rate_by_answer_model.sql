-- name: provenance_pass_rate_by_answer_model
-- version: 1
-- kind: breakdown
-- description: provenance_pass_rate split by the model that wrote the answer (citations.answer_model): the same gate across models, to tell a model's failures from the pipeline's.
-- numerator: citations with provenance reason ok, per answer model
-- denominator: citations checked by the provenance gate, per answer model ('unknown' when the citation row is missing); the values of a week and surface sum to provenance_pass_rate's
select
    date_trunc('week', r.day)::date as week_start,
    r.surface,
    coalesce(c.answer_model, 'unknown') as breakdown,
    r.citation_id,
    r.request_id,
    case when r.reason = 'ok' then 1.0 else 0.0 end as numerator_weight
from provenance_results r
left join citations c on c.citation_id = r.citation_id
