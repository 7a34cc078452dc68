-- Queue entries for the reviewer, at most $limit per reason, oldest first.
select * from citation_queue
where ($reason is null or reason = $reason)
  and ($surface is null or surface = $surface)
  and ($status is null or status = $status)
qualify row_number() over (partition by reason order by day, citation_id) <= $limit
order by reason, day, citation_id
