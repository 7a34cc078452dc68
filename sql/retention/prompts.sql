-- The prompt as sent, its normalized form and the answer; prompt_sha256, offsets and message bounds stay. A row
-- whose text is in a file (schema 12) no longer names it: lib/storage/text_store.py rewrote the file without it first.
update prompt_rows set prompt_raw = null, prompt_normalized = null, answer = null, text_file = null
where day between $first and $last  -- a constant range: only those days' row groups are read
  and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
  and (prompt_raw is not null or prompt_normalized is not null or answer is not null or text_file is not null)
