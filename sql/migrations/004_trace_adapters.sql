-- Schema 3 -> 4 (trace-format adapters): a prompt rebuilt from captured messages is flagged, and a
-- provider-native citation whose cited text is not at the location the API gave keeps why.
alter table prompts add column if not exists prompt_reconstructed boolean;
alter table citations add column if not exists location_mismatch varchar;
-- a retrieved text taken from the prompt (the trace had only the chunk's id) says so; chunks left out are listed
alter table retrievals add column if not exists text_source varchar;
alter table prompts add column if not exists retrieved_left_out varchar;
