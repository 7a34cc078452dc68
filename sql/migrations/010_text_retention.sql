-- Schema 9 -> 10: retention and `citegate forget` (lib/retention/drop_text.py, lib/retention/forget.py, docs/retention.md).
-- The text columns of the day tables may be null once their text is dropped; hashes, offsets, lengths, reasons
-- and verdicts stay. What was dropped is recorded: per day by retention, per request by forget.
alter table prompts alter column prompt_raw drop not null;
alter table prompts alter column prompt_normalized drop not null;
alter table retrievals alter column text drop not null;
alter table citations alter column span drop not null;
alter table citations alter column claim drop not null;
alter table citations alter column span_normalized drop not null;
alter table citations alter column claim_normalized drop not null;
alter table citation_queue alter column claim drop not null;
alter table citation_queue alter column span drop not null;
alter table review_outcomes alter column claim drop not null;
create table if not exists text_retention (
    day date not null,
    table_name varchar not null,
    rows_dropped bigint not null,
    text_days integer not null,
    dropped_at timestamptz not null
);
create table if not exists forgotten_requests (
    request_id varchar not null,
    forgotten_at timestamptz not null,
    forgotten_by varchar not null,
    reason varchar,
    rows_touched varchar not null
);
