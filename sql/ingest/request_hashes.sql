-- The hash of every request id in the prompt log, read once per ingest run (lib/known_requests.py). Reads
-- prompt_rows, not the view `prompts`: no text is needed.
select hash(request_id) as request_hash from prompt_rows
