-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- The day partitions holding the forgotten requests (publish rewrites exactly these).
select distinct day from prompt_rows where request_id in (select unnest($ids::varchar[])) and day is not null
union
select distinct day from ingest_rejects where request_id in (select unnest($ids::varchar[])) and day is not null
order by 1
