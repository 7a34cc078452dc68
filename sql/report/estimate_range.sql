-- `citegate estimate` without --start/--end: the first and last day of citations in the warehouse.
select min(day) as first_day, max(day) as last_day from citations
