-- Which tier decided each support verdict of the window (the run summary: unjudged citations, the cascade's savings).
select judge_model, verdict, decided_by, cost_usd
from support_verdicts where day >= $start and day < $end
