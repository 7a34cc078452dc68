-- Schema 5 -> 6: nightly judging through a provider's batch API.
-- A submitted batch is recorded before the run waits for it, with the pairs it carries, so a killed or
-- timed-out run collects the open batch on its next run instead of submitting (and paying for) the pairs again.
create table if not exists judge_batches (
    batch_id varchar not null,           -- the provider's batch id
    judge_model varchar not null,
    template_version varchar not null,
    day_start date not null,             -- the run's days [day_start, day_end) that submitted it
    day_end date not null,
    requests integer not null,           -- lines in its input file
    input_file_id varchar not null,
    status varchar not null,             -- the provider's last seen status (validating, in_progress, completed, ...)
    output_file_id varchar,
    error_file_id varchar,
    detail varchar,                      -- the provider's errors, or why collecting failed
    submitted_at timestamptz not null,
    checked_at timestamptz not null,     -- last poll
    collected_at timestamptz             -- results stored in judge_cache; null while the batch is open
);
create table if not exists judge_batch_items (
    batch_id varchar not null,
    cache_key varchar not null,          -- the custom_id of its request line
    passage_sha256 varchar not null,
    claim_sha256 varchar not null
);
