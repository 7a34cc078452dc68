-- Schema 2 -> 3: a citation that named its chunk by position ("[2]", "Source 2") keeps what it said.
alter table citations add column if not exists cited_as varchar;
