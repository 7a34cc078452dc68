-- The reason groups of the filtered queue: entries, open and decided counts, owners (null filter = any).
select reason, count(*) as entries, count(*) filter (where status = 'open') as open,
       count(*) filter (where status <> 'open') as decided,
       string_agg(distinct owner, ', ' order by owner) as owners
from citation_queue
where ($reason is null or reason = $reason)
  and ($surface is null or surface = $surface)
  and ($owner is null or owner = $owner)
  and ($week is null or (day >= $week::date and day < $week::date + 7))
  and ($status is null or status = $status or ($status = 'decided' and status <> 'open'))
group by reason
order by entries desc, reason
