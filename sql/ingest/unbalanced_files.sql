-- Landing files whose lines read differ from records ingested + records rejected (every_line_accounted_for).
-- A trace-format file (file_id 'trace:...') counts items in lines_read: each call it gave (ingested or rejected)
-- and each line reject, so the same equation holds for it; its detail accounts for every source line.
select file_name, lines_read, records_ingested, records_rejected from ingested_files
where lines_read <> records_ingested + records_rejected
