insert into forgotten_requests (request_id, forgotten_at, forgotten_by, reason, rows_touched)
values ($request_id, $forgotten_at, $forgotten_by, $reason, $rows_touched)
