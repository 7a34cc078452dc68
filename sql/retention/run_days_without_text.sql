-- Of the run's days, those holding prompts whose text was dropped (retention) or forgotten: re-gating them
-- would turn every such citation into a different verdict. Reads prompt_rows: a dropped text has neither inline
-- text nor a file (a lost file is the sha256 check's), and the view would open every text file.
select
    p.day,
    count(*) filter (where p.prompt_raw is null and p.text_file is null) as prompts_without_text,
    count(*) as prompts,
    (select count(*) from text_retention t where t.day = p.day) > 0 as retained
from prompt_rows p
where p.day in (select unnest($days::date[]))
group by p.day
having count(*) filter (where p.prompt_raw is null and p.text_file is null) > 0
order by p.day
