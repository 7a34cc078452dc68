-- Stored prompts of one day ($day: only that day's text files are opened) whose raw text no longer hashes to the
-- sha256 recorded at ingest, or whose text file (schema 12, lib/storage/text_store.py) is gone: a row naming a file yet
-- reading no text lost it. Run under text_store.streamed_text: the day's text streams past its prompt_rows.
select p.request_id, p.day, p.source_file, p.source_line
from prompts_between($day, $day + 1) p
join prompt_rows r on r.request_id = p.request_id and r.day = p.day
where r.day = $day
  and (sha256(p.prompt_raw) <> p.prompt_sha256 or (p.prompt_raw is null and r.text_file is not null))
order by p.request_id
