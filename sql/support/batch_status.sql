-- What the provider last said about a batch.
update judge_batches
set status = $status, output_file_id = $output_file_id, error_file_id = $error_file_id, detail = $detail,
    checked_at = $now
where batch_id = $batch_id
