-- Forget only (a review has no day: retention keeps the team's decisions, docs/retention.md): the reviewer's
-- snapshot of the claim and passage, and the note, of the request's citations (request id, '#', position);
-- the decision itself stays.
update review_outcomes set claim = null, passage = null, note = null
where exists (select 1 from scope_requests s where starts_with(citation_id, s.request_id || '#')
              and regexp_full_match(substr(citation_id, length(s.request_id) + 2), '[0-9]+'))
  and (claim is not null or passage is not null or note is not null)
