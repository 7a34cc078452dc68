-- Whether a removal of text is waiting for the working file to be rewritten.
select count(*) > 0 from pending_file_rewrite
