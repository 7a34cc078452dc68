-- Schema 17 -> 18: citations read from an answer's inline markers, and citations without a span (docs/log-format.md "Citations",
-- "The provenance gate"). Rows written before are structured citations with a span.
alter table citations add column if not exists origin varchar default 'structured';
alter table citations add column if not exists span_given boolean default true;
alter table citations add column if not exists anchor_start integer;
alter table citations add column if not exists anchor_end integer;
alter table citations add column if not exists anchor_prompt_start integer;
alter table citations add column if not exists anchor_prompt_end integer;
alter table citation_queue add column if not exists origin varchar;
alter table citation_queue add column if not exists cited_as varchar;
alter table citation_queue add column if not exists span_given boolean;
alter table citation_queue add column if not exists anchor varchar;
alter table citation_queue add column if not exists anchor_start integer;
alter table citation_queue add column if not exists anchor_end integer;
