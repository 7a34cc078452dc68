-- `citegate rejects`: the rejected lines (and calls, and whole files: line 0), by file and line, each with its
-- reason and detail; $file / $reason filter when given (null: any); the first $limit rows.
select source_file, line_no, reason, detail
from ingest_rejects
where ($file is null or source_file = $file) and ($reason is null or reason = $reason)
order by source_file, line_no, reason, detail
limit $limit
