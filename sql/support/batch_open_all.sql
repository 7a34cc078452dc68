-- Every batch of this judge model and template version not yet collected, oldest first: each run looks at the
-- open batches of other days once, so answers already paid for reach judge_cache without waiting for a re-run.
select batch_id from judge_batches
where collected_at is null and judge_model = $judge_model and template_version = $template_version
order by submitted_at, batch_id
