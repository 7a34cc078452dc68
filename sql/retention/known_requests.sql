-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- Which of the given request ids citegate holds anything of (a stored prompt, or a rejected line).
select request_id from prompt_rows where request_id in (select unnest($ids::varchar[]))
union
select request_id from ingest_rejects where request_id in (select unnest($ids::varchar[]))
union
select request_id from prompt_conflicts where request_id in (select unnest($ids::varchar[]))
