-- Stored prompts of the given days whose raw text no longer hashes to the sha256 recorded at ingest.
select request_id, day, source_file, source_line
from prompts
where day in (select unnest($days::date[])) and sha256(prompt_raw) <> prompt_sha256
order by request_id
