-- Batches not yet collected that carry any of the wanted keys (registered relation wanted_keys), for this judge
-- model and template version: a run waits for these instead of submitting their pairs again.
select b.batch_id, i.cache_key
from judge_batches b
join judge_batch_items i on i.batch_id = b.batch_id
join wanted_keys w on w.cache_key = i.cache_key
where b.collected_at is null and b.judge_model = $judge_model and b.template_version = $template_version
order by b.submitted_at, b.batch_id
