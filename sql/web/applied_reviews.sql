-- The decisions on one citation that the published copy's run applied (the rest of the log applies at the next run).
select review_id, is_latest from review_outcomes where citation_id = $citation_id
