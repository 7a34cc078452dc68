-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- The landing files and lines that still hold the request's text, as ingest recorded them: the landing folder
-- is the producer's, so forget names them for the operator instead of editing them.
select distinct source_file, line, what from (
    select request_id, source_file, source_line as line, 'prompt' as what from prompt_rows
    union all
    select request_id, source_file, source_line, 'conflicting prompt' from prompt_conflicts
    union all
    select request_id, source_file, line_no, 'rejected line' from ingest_rejects
    union all
    select request_id, source_file, line_no, 'trace span or event' from request_source_lines
)
where request_id = $request_id
order by source_file, line
