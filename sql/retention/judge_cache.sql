-- Cached judge answers on the claims in scope (keyed by sha256 of the normalized claim; an LLM judge's answer may
-- quote the claim or the passage), whatever the passage (the cited one, best evidence's others, a secondary
-- judge's): a later run that needs one judges it again. Runs before sql/retention/citations.sql drops the claims.
delete from judge_cache
where claim_sha256 in (
    select sha256(claim_normalized) from citations
    where day between $first and $last  -- a constant range: only those days' row groups are read
      and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
      and claim_normalized is not null
)
