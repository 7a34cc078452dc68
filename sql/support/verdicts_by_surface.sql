-- Support verdicts per surface for the window; screen and llm: the verdicts each tier decided (decided_by),
-- unjudged: what the screen left undecided with no LLM judge configured (never a pass).
select surface, judge_model,
       count(*) as judged,
       count(*) filter (where verdict = 'yes') as yes,
       count(*) filter (where verdict = 'partial') as partial,
       count(*) filter (where verdict = 'no') as no,
       count(*) filter (where verdict = 'unparseable') as unparseable,
       count(*) filter (where verdict = 'error') as error,
       count(*) filter (where verdict = 'unjudged') as unjudged,
       count(*) filter (where decided_by = 'screen') as screen,
       count(*) filter (where decided_by = 'llm') as llm,
       count(*) filter (where not numeric_ok) as numeric_mismatch,
       count(*) filter (where support_pass) as support_pass,
       count(*) filter (where cache_hit) as cache_hits
from support_verdicts where day >= $start and day < $end
group by all order by surface
