-- Text left the working file in this transaction: its freed blocks still hold it until the file is rewritten
-- (lib/storage/file_rewrite.py).
insert into pending_file_rewrite (why, marked_at) values ($why, now())
