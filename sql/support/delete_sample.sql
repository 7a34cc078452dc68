delete from support_sample where day >= $start and day < $end
