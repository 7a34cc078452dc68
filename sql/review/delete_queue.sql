delete from citation_queue where day >= $start and day < $end
