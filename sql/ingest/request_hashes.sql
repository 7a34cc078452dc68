-- The hash of every request id in the prompt log, with its day, read once per ingest run and sorted here
-- (lib/ingest/known_requests.py): DuckDB's sort stays within the memory limit (it spills), polars' would not
-- (10 million rows: +190 MB of peak RSS here, +650 MB sorted in polars).
select hash(request_id) as request_hash, day from prompt_rows order by request_hash
