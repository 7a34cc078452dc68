-- The judge's answer as returned (an LLM judge may quote the claim or passage); the verdict stays. A
-- "batch pending" marker holds no text and is kept: the nightly run looks for it.
update support_verdicts set raw_answer = null
where day between $first and $last  -- a constant range: only those days' row groups are read
  and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
  and raw_answer is not null and not starts_with(raw_answer, $pending)
