-- Which of the batch's request ids are already in the immutable prompt log, and with what prompt; whether its
-- text was removed (citegate forget, [retention] text_days): a refused copy's reject row then keeps no text.
select p.request_id, p.prompt_sha256, p.source_file || ':' || p.source_line as existing_source,
       p.prompt_raw is null as text_removed
from prompts p
join batch_keys k on k.request_id = p.request_id
