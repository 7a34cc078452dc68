-- The pairs of one batch, with what judge_cache needs to store their answers.
select cache_key, passage_sha256, claim_sha256 from judge_batch_items where batch_id = $batch_id
