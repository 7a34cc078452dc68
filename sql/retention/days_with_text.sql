-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- Day partitions before $cutoff that hold text retention has not dropped yet: never dropped, or written since
-- (a late record lands in an old day). Reads the day and write-time columns only, never the text. Re-gating a
-- dropped day is refused, so new rows of such a day come from ingest: prompts (with their retrievals,
-- citations and answer rejects) and rejected lines.
with written as (
    select day, max(ingested_at) as latest from prompt_rows where day < $cutoff group by day
    union all
    select coalesce(day, (rejected_at at time zone 'UTC')::date), max(rejected_at) from ingest_rejects
    where coalesce(day, (rejected_at at time zone 'UTC')::date) < $cutoff and raw_line is not null group by 1
),
dropped as (
    select day, max(dropped_at) as at from text_retention group by day
)
select distinct w.day
from written w
left join dropped d on d.day = w.day
where d.at is null or w.latest >= d.at
order by 1
