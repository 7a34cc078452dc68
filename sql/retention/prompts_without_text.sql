-- Stored prompts of the given days whose text was dropped (retention or forget): kept by their sha256 only.
select count(*) from prompts where day in (select unnest($days::date[])) and prompt_raw is null
