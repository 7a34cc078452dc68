-- One page of the review queue in (reason, day, citation_id) order after a key ($after_*: null = from the start);
-- the filters are optional (null = any). Keyset paging: the cost does not grow with the page number.
select citation_id, reason, day, surface, owner, status, escalation_cause, reviewed_by, reviewed_at, gate, claim
from citation_queue
where ($reason is null or reason = $reason)
  and ($surface is null or surface = $surface)
  and ($owner is null or owner = $owner)
  and ($week is null or (day >= $week::date and day < $week::date + 7))
  and ($status is null or status = $status or ($status = 'decided' and status <> 'open'))
  and ($after_id is null or (reason, day, citation_id) > ($after_reason, $after_day::date, $after_id))
order by reason, day, citation_id
limit $limit
