-- Schema 10 -> 11: the retrieved text as logged is stored once too. A new ingest leaves retrievals.text
-- null where the text stands verbatim in prompts.prompt_raw and records where: [raw_start, raw_end), characters.
-- Rows written before keep their text (readers coalesce, so both read the same); nothing is rewritten here.
alter table retrievals add column if not exists raw_start integer;
alter table retrievals add column if not exists raw_end integer;
