-- Schema 12 -> 13: a retrieved text that a JSON-encoded prompt holds escaped (chat messages logged as
-- JSON) is stored once too: retrievals.text is null, [raw_start, raw_end) of prompt_raw holds the text as the body of
-- a JSON string, and raw_encoding is 'json'. Rows written before keep their text (readers coalesce, so both read the
-- same); nothing is rewritten here.
alter table retrievals add column if not exists raw_encoding varchar;
