-- Ingest progress of landing files (batch_ledger, one row per file touched); written in the same transaction
-- as the rows it counts, so a crash leaves the ledger and the tables consistent and the next run resumes after them.
delete from ingested_files where file_id in (select file_id from batch_ledger);
delete from ingested_files where file_id in (select unnest(replaces) from batch_ledger);
insert into ingested_files by name select * exclude (replaces) from batch_ledger;
