delete from judge_agreement where day >= $start and day < $end
