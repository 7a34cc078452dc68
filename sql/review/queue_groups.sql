-- Queue groups for the reviewer: reason, counts, owners; filters are optional (null = any).
select reason, count(*) as entries, count(*) filter (where status = 'open') as open,
       string_agg(distinct owner, ', ' order by owner) as owners
from citation_queue
where ($reason is null or reason = $reason)
  and ($surface is null or surface = $surface)
  and ($status is null or status = $status)
group by reason
order by entries desc, reason
