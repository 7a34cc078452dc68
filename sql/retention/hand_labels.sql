-- Forget only: an accepted review of the request's citations became a calibration sample (sql/support/
-- accepted_reviews.sql) holding its claim and passage, and an own label (`citegate label`) holds the pair of the
-- citation it was drawn from; both leave the labels.
delete from hand_labels
where label_id in (
    select 'review:' || o.review_id from review_outcomes o
    where exists (select 1 from scope_requests s where starts_with(o.citation_id, s.request_id || '#')
                  and regexp_full_match(substr(o.citation_id, length(s.request_id) + 2), '[0-9]+'))
)
or exists (
    select 1 from scope_requests s
    where starts_with(hand_labels.citation_id, s.request_id || '#')
      and regexp_full_match(substr(hand_labels.citation_id, length(s.request_id) + 2), '[0-9]+')
)
