-- Cached judge answers on the request's claims (keyed by sha256 of the normalized claim); a later run that
-- needs one judges it again.
delete from judge_cache
where claim_sha256 in (
    select sha256(claim_normalized) from citations
    where request_id in (select request_id from scope_requests) and claim_normalized is not null
)
