-- Prompts per surface, and how many of them an adapter rebuilt from captured messages rather than logged as sent
-- (prompts.prompt_reconstructed; README "Trace formats"): the weekly_metrics asset's metadata.
select
    surface,
    count(*) as prompts,
    count(*) filter (where prompt_reconstructed) as prompts_reconstructed
from prompts
group by surface
having count(*) filter (where prompt_reconstructed) > 0
order by surface
