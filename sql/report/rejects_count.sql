-- How many rejects `citegate rejects` would list with these filters (null: any); the run summary asks for all.
select count(*) from ingest_rejects
where ($file is null or source_file = $file) and ($reason is null or reason = $reason)
