-- The rejected line as read; the reason and the landing file and line stay. A reject with no readable day
-- is aged by the UTC day it was rejected.
update ingest_rejects set raw_line = null
where coalesce(day, (rejected_at at time zone 'UTC')::date) between $first and $last
  and (coalesce(day, (rejected_at at time zone 'UTC')::date) in (select day from scope_days)
       or request_id in (select request_id from scope_requests))
  and raw_line is not null
