-- The page of the review queue just before a key, nearest first (the caller reverses it): previous-page and
-- previous-entry links, with the same filters as queue_page.sql.
select citation_id, reason, day, surface, owner, status, escalation_cause, reviewed_by, reviewed_at, gate, claim
from citation_queue
where ($reason is null or reason = $reason)
  and ($surface is null or surface = $surface)
  and ($owner is null or owner = $owner)
  and ($week is null or (day >= $week::date and day < $week::date + 7))
  and ($status is null or status = $status or ($status = 'decided' and status <> 'open'))
  and (reason, day, citation_id) < ($before_reason, $before_day::date, $before_id)
order by reason desc, day desc, citation_id desc
limit $limit
