-- One ingest batch, registered as batch_* relations, appended in the caller's transaction.
insert into prompt_rows by name select * from batch_prompts;
insert into prompt_sections by name select * from batch_sections;
insert into retrievals by name select * from batch_retrievals;
insert into citations by name select * from batch_citations;
insert into answer_rejects by name select * from batch_answer_rejects;
insert into ingest_rejects by name select * from batch_rejects;
insert into prompt_conflicts by name select * from batch_conflicts;
insert into request_source_lines by name select * from batch_source_lines;
