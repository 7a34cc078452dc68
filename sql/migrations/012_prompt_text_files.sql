-- Schema 11 -> 12: new prompts keep their text in Parquet files beside the warehouse (lib/storage/text_store.py).
-- The table becomes prompt_rows with the file's name; `prompts` becomes a view (created by lib/storage/text_store.py, since
-- it names the folder). Rows written before keep their text inline; nothing is rewritten here.
alter table prompts rename to prompt_rows;
alter table prompt_rows add column if not exists text_file varchar;
