-- Files of one landing folder read to their end before, with the days of their valid records (run planning).
select file_name, size_bytes, mtime_ns, days from ingested_files where status = 'complete' and landing = $landing
