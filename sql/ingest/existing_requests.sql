-- Reads prompt_rows, not the view `prompts`: no text is needed, and the view would open every text file.
-- batch_keys: (request_id, day) of the batch's ids whose hash the log holds, on each day a row of that hash has
-- (lib/ingest/known_requests.py): the join on the day lets the scan skip the row groups of other days.
-- Which of the batch's request ids are already in the immutable prompt log, and with what prompt; whether its
-- text was removed (citegate forget, [retention] text_days): a refused copy's reject row then keeps no text.
-- Read from the audit tables, never from prompt_raw: a multi-megabyte prompt would not fit ingest's memory cap.
select p.request_id, p.prompt_sha256, p.source_file || ':' || p.source_line as existing_source,
       p.request_id in (select request_id from forgotten_requests)
       or p.day in (select day from text_retention) as text_removed
from prompt_rows p
join batch_keys k on k.request_id = p.request_id and k.day = p.day
