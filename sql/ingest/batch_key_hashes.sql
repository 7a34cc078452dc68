-- A batch's request ids with the hash request_hashes.sql gives the prompt log's (the same DuckDB function).
select request_id, hash(request_id) as request_hash from batch_keys
