-- Escalations in force, by cause: the outcomes that should reduce future queue volume.
select cause, count(*) as entries, count(distinct queue_reason) as reasons, min(reviewed_at) as first, max(reviewed_at) as last
from review_outcomes where is_latest and outcome = 'escalate'
group by cause order by entries desc
