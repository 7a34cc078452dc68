-- name: support_pass_rate_by_answer_model
-- version: 1
-- kind: breakdown
-- description: support_pass_rate split by the model that wrote the answer (support_verdicts.answer_model, copied from citations.answer_model when judged): the same gate across models, to tell a model's failures from the pipeline's.
-- numerator: judged citations with verdict yes and no numeric mismatch, per answer model
-- denominator: judged citations with a verdict (yes, partial, no, unparseable; judge errors excluded), per answer model; the values of a week and surface sum to support_pass_rate's
select
    date_trunc('week', v.day)::date as week_start,
    v.surface,
    v.answer_model as breakdown,
    v.citation_id,
    v.request_id,
    case when v.verdict = 'yes' and v.numeric_ok then 1.0 else 0.0 end as numerator_weight
from support_verdicts v
where v.verdict in ('yes', 'partial', 'no', 'unparseable')
