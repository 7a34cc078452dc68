-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- After each ingest: how many prompts are stored, so prompts_match_their_sha256 can see the log never shrinks.
insert into prompt_count_history (checked_at, prompts) select $recorded_at, count(*) from prompt_rows
