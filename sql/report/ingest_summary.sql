-- What the warehouse holds, table by table.
select what, n from (
    select 1 as ord, 'landing files' as what, count(*) as n from ingested_files
    union all select 2, 'lines read', coalesce(sum(lines_read), 0) from ingested_files
    union all select 3, 'prompts (records ingested)', count(*) from prompts
    union all select 4, 'lines rejected (ingest_rejects)', count(*) from ingest_rejects where line_no > 0
    union all select 5, 'files rejected (ingest_rejects)', count(*) from ingest_rejects where line_no = 0
    union all select 6, 'answers rejected (answer_rejects)', count(*) from answer_rejects
    union all select 7, 'request id conflicts (prompt_conflicts)', count(*) from prompt_conflicts
    union all select 8, 'citations', count(*) from citations
    union all select 9, 'provenance results', count(*) from provenance_results
    union all select 10, 'support verdicts', count(*) from support_verdicts
    union all select 11, 'hand labels', count(*) from hand_labels
) order by ord
