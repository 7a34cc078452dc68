-- What the warehouse holds, table by table.
select 'landing files' as what, count(*) as n from ingested_files
union all select 'lines read', coalesce(sum(lines_read), 0) from ingested_files
union all select 'prompts (records ingested)', count(*) from prompts
union all select 'lines rejected (ingest_rejects)', count(*) from ingest_rejects where line_no > 0
union all select 'files rejected (ingest_rejects)', count(*) from ingest_rejects where line_no = 0
union all select 'answers rejected (answer_rejects)', count(*) from answer_rejects
union all select 'request id conflicts (prompt_conflicts)', count(*) from prompt_conflicts
union all select 'citations', count(*) from citations
union all select 'provenance results', count(*) from provenance_results
