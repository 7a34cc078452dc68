-- Provenance rows per day of the window.
select day::varchar, count(*) from provenance_results where day >= $start and day < $end group by day
