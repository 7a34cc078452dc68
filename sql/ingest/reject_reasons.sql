-- Reject counts by reason for the days [$start, $end); file-level and undated line rejects included.
select 'ingest_rejects' as table_name, reason, count(*) as n
from ingest_rejects where day >= $start and day < $end or day is null group by reason
union all
select 'answer_rejects', reason, count(*) from answer_rejects where day >= $start and day < $end group by reason
order by table_name, n desc
