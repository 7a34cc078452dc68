-- Schema 14 -> 15: a trace call's record may be read from several landing lines (an OTLP call's events, its paired
-- retrievers); the ones besides its own are listed so that `citegate forget` names every one. Calls ingested before
-- have no rows (forget names their own line, as before).
create table if not exists request_source_lines (
    request_id varchar not null,
    source_file varchar not null,
    line_no bigint not null
);
