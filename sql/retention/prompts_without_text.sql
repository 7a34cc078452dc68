-- Stored prompts of the given days whose text was dropped (retention or forget): kept by their sha256 only. Reads
-- prompt_rows: a dropped text has neither inline text nor a file (a lost file is the sha256 check's), and the view
-- would open every text file.
select count(*) from prompt_rows
where day in (select unnest($days::date[])) and prompt_raw is null and text_file is null
