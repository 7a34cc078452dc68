-- Every reject, by table and reason (most frequent first; ties by reason, so the order is stable).
select 'ingest_rejects' as rejected_in, reason, count(*) as n from ingest_rejects group by reason
union all
select 'answer_rejects', reason, count(*) from answer_rejects group by reason
order by rejected_in, n desc, reason
