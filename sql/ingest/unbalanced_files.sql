-- Landing files whose lines read differ from records ingested + records rejected (every_line_accounted_for).
select file_name, lines_read, records_ingested, records_rejected from ingested_files
where lines_read <> records_ingested + records_rejected
