-- Ingest progress of one landing file; written in the same transaction as the rows it counts,
-- so a crash leaves the ledger and the tables consistent and the next run resumes after them.
delete from ingested_files where file_name = $file_name;
insert into ingested_files values (
    $file_name, $file_sha256, $size_bytes, $status, $lines_read, $records_ingested, $records_rejected,
    $answers_rejected, $detail, $first_seen_at, $finished_at
);
