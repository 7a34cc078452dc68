-- The paging key of one queue entry (its place in the queue's order), for the previous/next entry links.
select reason, strftime(day, '%Y-%m-%d') as day, citation_id from citation_queue where citation_id = $citation_id
