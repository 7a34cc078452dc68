-- Provenance rows of the days [$start, $end).
select count(*) from provenance_results where day >= $start and day < $end
