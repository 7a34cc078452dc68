-- The first UTC day a valid record was ingested on (null: none yet): where the daily partitions start. Reads the
-- ingested files' ledger, a table in the published copy too, so no lake file is opened.
select min(d) from (select unnest(days) as d from ingested_files)
