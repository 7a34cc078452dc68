-- The prompts of an in-memory warehouse (no text folder): every text is inline.
select * exclude (text_file) from prompt_rows
