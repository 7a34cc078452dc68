-- A batch just created at the provider, and its pairs (registered relation new_batch_items), in one transaction.
insert into judge_batches (
    batch_id, judge_model, template_version, day_start, day_end, requests, input_file_id, status,
    submitted_at, checked_at
) values ($batch_id, $judge_model, $template_version, $day_start, $day_end, $requests, $input_file_id, $status,
          $now, $now);
insert into judge_batch_items by name
select $batch_id as batch_id, cache_key, passage_sha256, claim_sha256 from new_batch_items;
