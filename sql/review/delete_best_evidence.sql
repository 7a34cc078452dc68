delete from best_evidence where day >= $start and day < $end
