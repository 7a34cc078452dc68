-- The day partitions holding the forgotten requests (publish rewrites exactly these).
select distinct day from prompts where request_id in (select unnest($ids::varchar[])) and day is not null
union
select distinct day from ingest_rejects where request_id in (select unnest($ids::varchar[])) and day is not null
order by 1
