-- Of the run's days, those holding prompts whose text was dropped (retention) or forgotten: re-gating them
-- would turn every such citation into a different verdict.
select
    p.day,
    count(*) filter (where p.prompt_raw is null) as prompts_without_text,
    count(*) as prompts,
    (select count(*) from text_retention t where t.day = p.day) > 0 as retained
from prompts p
where p.day in (select unnest($days::date[]))
group by p.day
having count(*) filter (where p.prompt_raw is null) > 0
order by p.day
