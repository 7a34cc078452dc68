-- The cited span and the claim, and a native citation's location_mismatch (it quotes the cited text and the
-- document: lib/ingest/adapters/anthropic.py); chunk id, position and cited_as stay.
update citations
set span = null, claim = null, span_normalized = null, claim_normalized = null, location_mismatch = null
where day between $first and $last  -- a constant range: only those days' row groups are read
  and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
  and (span is not null or claim is not null or span_normalized is not null or claim_normalized is not null
       or location_mismatch is not null)
