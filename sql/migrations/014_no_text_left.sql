-- Schema 13 -> 14: retention and forget leave no text behind in the working file (docs/retention.md).
-- A removal of text marks the file for a rewrite (lib/storage/file_rewrite.py): its freed blocks still hold the text.
create table if not exists pending_file_rewrite (
    why varchar not null,
    marked_at timestamptz not null
);

-- A rejected line that names a request id carries it (lib/ingest/records.py request_id_of), so forget finds it: the rows
-- written before get the id their raw line names, when it is a JSON object whose request_id is a non-blank string.
update ingest_rejects set request_id = named.request_id
from (
    select rowid as row_id,
           try(json_extract_string(raw_line, '$.request_id')) as request_id,
           try(json_type(raw_line, '$.request_id')) as kind
    from ingest_rejects
    where request_id is null and raw_line is not null
) named
where ingest_rejects.rowid = named.row_id and named.kind = 'VARCHAR' and regexp_matches(named.request_id, '\S');

-- location_mismatch quotes the cited text and the document: dropped with the citation's text since schema 14, and
-- here from the citations whose text retention or forget dropped before.
update citations set location_mismatch = null where span is null and location_mismatch is not null;

-- Text removed before this version may still be in the file's free blocks: the next removal step rewrites it.
insert into pending_file_rewrite (why, marked_at)
select 'text removed before schema 14', now()
where exists (select 1 from text_retention) or exists (select 1 from forgotten_requests);
