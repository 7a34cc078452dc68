-- Stored prompts whose raw text no longer hashes to the sha256 recorded at ingest.
select request_id, day, source_file, source_line from prompts where sha256(prompt_raw) <> prompt_sha256 order by request_id
