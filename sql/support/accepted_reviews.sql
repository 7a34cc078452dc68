-- A reviewer's accept says the gate was too strict: the pair becomes a calibration sample labelled yes.
select 'review:' || review_id as label_id, claim, passage, 'yes' as label, reviewer as labeller,
       source_file, source_line, claim as claim_normalized, passage as passage_normalized
from review_outcomes
where is_latest and outcome = 'accept' and passage is not null
order by reviewed_at
