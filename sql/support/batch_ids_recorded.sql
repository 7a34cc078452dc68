-- Every batch id the warehouse holds, open or collected: a batch found at the provider by its token is adopted
-- only when it is not one of these (a collected batch's answers are already in judge_cache).
select batch_id from judge_batches
