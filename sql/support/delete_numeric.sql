delete from numeric_checks where day >= $start and day < $end
