-- The retrieved chunk's text; chunk id, rank, doc id, chunking and offsets stay.
update retrievals set text = null, text_normalized = null
where day between $first and $last  -- a constant range: only those days' row groups are read
  and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
  and (text is not null or text_normalized is not null)
