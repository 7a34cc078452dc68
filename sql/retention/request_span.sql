-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- The first and last day holding anything of the request (null when no row has a day).
select min(d), max(d) from (
    select day as d from prompt_rows where request_id = $request_id
    union all
    select coalesce(day, (rejected_at at time zone 'UTC')::date) from ingest_rejects where request_id = $request_id
    union all
    select day from answer_rejects where request_id = $request_id
)
