-- Schema 1 -> 2: landing files are known by their content, not their name (issue: rotation lost records).
-- Rows written by schema 1 become legacy:<name> rows, adopted the next time their file is read.
alter table ingested_files add column if not exists file_id varchar;
alter table ingested_files add column if not exists landing varchar;
alter table ingested_files add column if not exists mtime_ns bigint;
alter table ingested_files add column if not exists bytes_consumed bigint;
alter table ingested_files add column if not exists days date[];
update ingested_files set file_id = case when status = 'skipped' then 'legacy-entry:' else 'legacy:' end || file_name where file_id is null;
