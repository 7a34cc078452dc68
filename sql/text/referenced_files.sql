-- The text files some prompt row names: every other file in the text folder is never read (lib/storage/text_store.py).
select distinct text_file from prompt_rows where text_file is not null
