-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- Prompts per surface, and how many of them an adapter rebuilt from captured messages rather than logged as sent
-- (prompts.prompt_reconstructed; docs/adapters.md): the weekly_metrics asset's metadata.
select
    surface,
    count(*) as prompts,
    count(*) filter (where prompt_reconstructed) as prompts_reconstructed
from prompt_rows
group by surface
having count(*) filter (where prompt_reconstructed) > 0
order by surface
