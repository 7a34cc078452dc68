-- Support pass rate by the cited chunk's retrieval rank, per surface and week: are low-ranked passages cited as filler?
select week_start, surface, breakdown as rank, numerator as passed, denominator as judged, round(value, 3) as support_pass_rate
from weekly_breakdowns
where metric = 'support_rate_by_rank'
order by surface, week_start, rank
