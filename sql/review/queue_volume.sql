-- Queue entries of [$start, $end) by reason and surface, with how many are still open.
select reason, surface, owner, count(*) as entries, count(*) filter (where status = 'open') as open
from citation_queue where day >= $start and day < $end
group by all order by entries desc
