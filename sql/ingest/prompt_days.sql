-- The days the prompt log holds, with their prompt counts (prompts_match_their_sha256 picks tonight's).
select day, count(*) as prompts from prompts group by day order by day
