-- Provenance-passing citations per surface and why they are or are not judged.
select surface, stakes, why, count(*) as citations from support_sample
where day >= $start and day < $end group by all order by surface, why
