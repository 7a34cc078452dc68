-- Reconciles provenance_results with citations for the days [$start, $end).
with c as (select citation_id from citations where day >= $start and day < $end),
     p as (select citation_id, count(*) as n from provenance_results where day >= $start and day < $end group by citation_id)
select
    (select count(*) from c anti join p using (citation_id)) as missing,
    (select count(*) from p where n > 1) as duplicated,
    (select count(*) from p anti join c using (citation_id)) as orphaned
