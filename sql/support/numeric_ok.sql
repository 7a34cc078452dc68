-- The numeric check's outcome per citation of the days [$start, $end).
select citation_id, numeric_ok from numeric_checks where day >= $start and day < $end
