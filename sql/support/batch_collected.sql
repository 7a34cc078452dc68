-- The batch's answers are in judge_cache (same transaction): it is closed, no run waits for it again.
update judge_batches set collected_at = $now where batch_id = $batch_id
