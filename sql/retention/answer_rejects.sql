-- The citations field as logged; the reason and the landing file and line stay.
update answer_rejects set raw_field = null
where day between $first and $last  -- a constant range: only those days' row groups are read
  and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
  and raw_field is not null
