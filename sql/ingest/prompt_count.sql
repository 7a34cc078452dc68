-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- Prompts stored now, and the most ever recorded after an ingest (prompts_match_their_sha256).
select (select count(*) from prompt_rows) as stored,
       (select coalesce(max(prompts), 0) from prompt_count_history) as most_ever_stored
