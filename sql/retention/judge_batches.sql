-- A batch's errors as the provider gave them (a gateway may quote the lines sent): of the batches judging a day in
-- scope, or a pair on a claim in scope (before sql/retention/citations.sql drops the claims); the status stays.
update judge_batches set detail = null
where detail is not null
  and (exists (select 1 from scope_days s where s.day >= day_start and s.day < day_end)
       or batch_id in (
           select i.batch_id from judge_batch_items i
           where i.claim_sha256 in (
               select sha256(claim_normalized) from citations
               where day between $first and $last  -- a constant range: only those days' row groups are read
                 and request_id in (select request_id from scope_requests) and claim_normalized is not null
           )
       ))
