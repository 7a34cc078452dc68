-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- Rows per ingest table for the days [$start, $end); the ledger counts files read in that window.
select 'prompts' as table_name, count(*) from prompt_rows where day >= $start and day < $end
union all select 'prompt_sections', count(*) from prompt_sections where day >= $start and day < $end
union all select 'retrievals', count(*) from retrievals where day >= $start and day < $end
union all select 'citations', count(*) from citations where day >= $start and day < $end
union all select 'ingest_rejects', count(*) from ingest_rejects where day >= $start and day < $end or day is null
union all select 'answer_rejects', count(*) from answer_rejects where day >= $start and day < $end
union all select 'prompt_conflicts', count(*) from prompt_conflicts where day >= $start and day < $end
union all select 'ingested_files', count(*) from ingested_files
