-- The fingerprint each recomputed week was computed from (temp tables touched_weeks and current_week_inputs).
insert into metric_week_inputs
select c.week_start, c.fingerprint, $definitions_sha256, $now::timestamptz
from current_week_inputs c
where c.week_start in (select week_start from touched_weeks)
