-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- The days the prompt log holds, with their prompt counts (prompts_match_their_sha256 picks tonight's).
select day, count(*) as prompts from prompt_rows group by day order by day
