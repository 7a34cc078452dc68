delete from support_verdicts where day >= $start and day < $end
