-- The queue entry a review names, by its citation id exactly as typed (`citegate review`).
select reason, claim, passage, status from citation_queue where citation_id = $citation_id
