-- Every surface whose citations were gated in the days [$start, $end): the surfaces a policy is resolved for.
select distinct surface from provenance_results where day >= $start and day < $end order by 1
