-- Warehouse tables at the current schema version (lib/storage/warehouse.py SCHEMA_VERSION). Created if missing; an older
-- warehouse is upgraded by sql/migrations/ first. The ingest tables are append-only (the prompt log is immutable).

create table if not exists ingested_files (
    file_name varchar not null,          -- the file's name in the landing folder, where it was last seen
    file_sha256 varchar,                 -- sha256 of exactly the (decompressed) bytes consumed
    size_bytes bigint,                   -- size on disk when last read
    status varchar not null,             -- complete | partial | waiting | failed | skipped (lib/ingest/ledger.py)
    lines_read bigint not null default 0,
    records_ingested bigint not null default 0,
    records_rejected bigint not null default 0,
    answers_rejected bigint not null default 0,
    detail varchar,
    first_seen_at timestamptz,
    finished_at timestamptz,
    -- added in schema version 2 (sql/migrations/002_file_identity.sql)
    file_id varchar,                     -- identity: sha256 of the first line; entry:/path:/legacy: rows otherwise
    landing varchar,                     -- the landing folder (resolved) it was read from
    mtime_ns bigint,                     -- modification time when last read
    bytes_consumed bigint,               -- bytes of complete lines consumed (decompressed for .gz)
    days date[]                          -- UTC days of the valid records ingested from it
);

-- Each prompt's row; its text is in the text folder's Parquet file named by text_file (schema 12, lib/storage/text_store.py)
-- or, for rows written before, inline. Readers read the view `prompts`, which joins the two.
create table if not exists prompt_rows (
    request_id varchar not null,
    day date not null,                   -- UTC date of logged_at: the daily partition
    logged_at timestamptz not null,
    surface varchar not null,
    answer_model varchar not null,
    template varchar not null,           -- the profile that rendered the chunks
    prompt_encoding varchar not null,    -- text | json | python_repr
    prompt_raw varchar,                  -- the prompt field exactly as logged (null: dropped, schema 10)
    prompt_sha256 varchar not null,      -- sha256 of prompt_raw (UTF-8)
    profile_status varchar not null,     -- ok | no_context_block | unknown_template | location_budget_exceeded
    answer varchar,
    source_file varchar not null,
    source_line bigint not null,
    prompt_normalized varchar,           -- N(decoded prompt), pieces joined by one space (null: dropped)
    context_start integer,               -- [context_start, context_end): the context block in prompt_normalized
    context_end integer,
    message_bounds struct(role varchar, "start" bigint, "end" bigint)[],
    n_sections integer not null,
    normalization_version varchar not null,
    ingested_at timestamptz not null,
    prompt_reconstructed boolean,         -- schema 4: true when an adapter rebuilt the prompt from captured messages
    retrieved_left_out varchar,           -- schema 4: JSON [{chunk_id, why}], chunks a trace named without a text
    text_file varchar                     -- schema 12: day=YYYY-MM-DD/<batch>.parquet in the text folder (null: inline)
);

create table if not exists prompt_sections (
    request_id varchar not null,
    day date not null,
    section_no integer not null,         -- 0-based order in the context block
    header_ref varchar,                  -- what the section header carries (chunk id or position), normalized
    chunk_id varchar,                    -- the retrieved chunk it resolves to (null: unresolved)
    resolved_by varchar,                 -- chunk_id | position | content | content_prefix | content_part
    body_start integer not null,         -- [body_start, body_end) in prompts.prompt_normalized
    body_end integer not null,
    chunk_chars integer,                 -- length of the retrieved chunk's normalized text
    truncated boolean                    -- the body is a strict prefix of the retrieved text
);

create table if not exists retrievals (
    request_id varchar not null,
    day date not null,
    chunk_id varchar not null,
    rank integer not null,
    position integer not null,           -- 0-based index in the logged `retrieved` array
    doc_id varchar,
    chunking varchar,
    text varchar,                        -- null: dropped by retention or forget (schema 10), or in prompt_raw (raw_start)
    text_normalized varchar,             -- schema 9: null when it is prompts.prompt_normalized[prompt_start, prompt_end)
    in_prompt boolean not null,          -- a context section resolves to this chunk
    text_source varchar,                 -- schema 4: 'prompt' when an adapter took the text from the prompt (no
                                         -- text in the trace), else the retriever's own (null)
    prompt_start integer,                -- schema 9: the first section holding this chunk, when its body is exactly
    prompt_end integer,                  -- the normalized text: [prompt_start, prompt_end) in prompt_normalized
    raw_start integer,                   -- schema 11: where the text as logged stands verbatim in prompts.prompt_raw,
    raw_end integer,                     -- text is null and [raw_start, raw_end) of prompt_raw holds it
    raw_encoding varchar                 -- schema 13: 'json' when that substring is the text as the body of a JSON
                                         -- string (decode it with json_extract_string), else null (verbatim)
);

create table if not exists citations (
    citation_id varchar not null,        -- request_id || '#' || position
    request_id varchar not null,
    day date not null,
    position integer not null,           -- 0-based position in the citations array
    surface varchar not null,
    answer_model varchar not null,
    chunk_id varchar not null,
    span varchar,                        -- the four text columns: null once dropped (schema 10)
    claim varchar,
    span_normalized varchar,
    claim_normalized varchar,
    normalization_version varchar not null,
    cited_as varchar,                    -- schema 3: the id as the answer gave it, when that was a position ("[2]");
                                         -- schema 18: an inline marker as written ("[1-3]", "【2】")
    location_mismatch varchar,           -- schema 4: a native citation whose cited text is not at its location: why
    -- schema 18: where the citation came from, and the anchor of one without a span (docs/log-format.md "Citations")
    origin varchar default 'structured', -- structured (the log's citations) | marker (the answer's) | native (a provider's)
    span_given boolean default true,     -- false: no span (a marker, or {chunk_id, claim}): the anchor is checked
    anchor_start integer,                -- the claim's best-supporting sentence in the cited chunk's retrieved text
    anchor_end integer,                  --   (normalized); null: no sentence shares a word or number with the claim
    anchor_prompt_start integer,         -- ... and in prompt_normalized, when all of it reached the prompt
    anchor_prompt_end integer
);

create table if not exists ingest_rejects (
    source_file varchar not null,
    line_no bigint not null,             -- 1-based; 0 for a whole-file reject
    day date,                            -- when logged_at could be read
    request_id varchar,                  -- when it could be read
    reason varchar not null,
    detail varchar,
    raw_line varchar,
    rejected_at timestamptz not null
);

-- schema 15: the other landing lines a trace call's record was read from (its events, its paired retrievers), so
-- `citegate forget` names them with the call's own line (prompt_rows.source_line / ingest_rejects.line_no); no text
create table if not exists request_source_lines (
    request_id varchar not null,
    source_file varchar not null,
    line_no bigint not null
);

create table if not exists answer_rejects (
    request_id varchar not null,
    day date not null,
    reason varchar not null,
    detail varchar,
    raw_field varchar,                   -- the citations field as logged
    source_file varchar not null,
    source_line bigint not null,
    rejected_at timestamptz not null
);

create table if not exists prompt_conflicts (
    request_id varchar not null,
    day date,
    existing_sha256 varchar not null,    -- the prompt kept (first ingested)
    conflicting_sha256 varchar not null, -- the prompt refused
    existing_source varchar,
    source_file varchar not null,
    source_line bigint not null,
    recorded_at timestamptz not null
);

create table if not exists provenance_results (
    citation_id varchar not null,
    request_id varchar not null,
    day date not null,
    surface varchar not null,
    chunk_id varchar not null,
    verdict varchar not null,            -- present | absent | unverifiable
    reason varchar not null,             -- ok | fabricated_id | dropped_before_prompt | span_truncated | span_missing
                                         -- | span_outside_context | span_in_other_chunk | context_not_found
                                         -- | location_mismatch (a native citation whose text is not at its location)
    found_start integer,                 -- where the span was found in prompt_normalized, if anywhere
    found_end integer,
    chunk_share_in_prompt double,        -- span_truncated: share of the chunk's text that reached the prompt
    normalization_version varchar not null,
    checked_at timestamptz not null
);

create table if not exists support_sample (
    citation_id varchar not null,        -- every provenance-passing citation of the day
    request_id varchar not null,
    day date not null,
    surface varchar not null,
    stakes varchar not null,             -- high | low | off, from the surface policy
    sample_rate double not null,
    sample_key double not null,          -- sha256-derived, uniform in [0, 1): the same on every re-run
    selected boolean not null,           -- will be judged
    why varchar not null                 -- high_stakes | sampled | not_sampled | stakes_off
);

create table if not exists numeric_checks (
    citation_id varchar not null,        -- every provenance-passing citation of the day
    request_id varchar not null,
    day date not null,
    surface varchar not null,
    claim_quantities varchar[] not null, -- numbers found in the claim, canonical ("1200 USD", "12 %")
    missing_quantities varchar[] not null, -- those the passage does not hold
    numeric_ok boolean not null,         -- no claim quantity is missing
    checked_at timestamptz not null
);

create table if not exists judge_cache (
    cache_key varchar not null,          -- sha256(judge model, template version, normalized passage, normalized claim)
    judge_model varchar not null,
    template_version varchar not null,
    passage_sha256 varchar not null,
    claim_sha256 varchar not null,
    verdict varchar not null,            -- yes | partial | no | unparseable; the screen's also undecided (an `error`
                                         -- and `unjudged` are never cached)
    raw_answer varchar,
    prompt_tokens integer,
    completion_tokens integer,
    latency_ms double,
    cost_usd double,
    judged_at timestamptz not null
);

create table if not exists support_verdicts (
    citation_id varchar not null,        -- every selected citation of the day
    request_id varchar not null,
    day date not null,
    surface varchar not null,
    answer_model varchar not null,
    judge_model varchar not null,
    template_version varchar not null,
    verdict varchar not null,            -- yes | partial | no | unparseable | error | unjudged (the screen left it
                                         -- undecided and no LLM judge is configured: never a pass)
    raw_answer varchar,                  -- the judge's text as returned, reasoning included (for error: what failed)
    numeric_ok boolean not null,         -- from numeric_checks
    support_pass boolean not null,       -- verdict = yes and numeric_ok
    cache_hit boolean not null,
    latency_ms double,
    prompt_tokens integer,
    completion_tokens integer,
    cost_usd double,                     -- estimated from [judge.prices]; null when the model has no price
    attempts integer,
    judge_is_answer_model boolean not null,
    judged_at timestamptz not null,
    decided_by varchar                   -- schema 16: the tier whose verdict stands, screen | llm (null: unjudged, error)
);

-- added in schema version 6 (sql/migrations/006_judge_batches.sql): [judge] mode = "batch"
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

-- added in schema version 7 (sql/migrations/007_judge_agreement.sql): [judge.secondary], a candidate judge on a
-- sample of the primary's judged pairs; read only for agreement (Cohen's kappa, the confusion table)
create table if not exists judge_agreement (
    citation_id varchar not null,
    day date not null,
    surface varchar not null,
    primary_model varchar not null,
    primary_verdict varchar not null,    -- yes | partial | no (as in support_verdicts)
    secondary_model varchar not null,
    secondary_verdict varchar not null,  -- yes | partial | no | unparseable | error (a failure is never agreement)
    secondary_raw_answer varchar,        -- the secondary's text as returned (for error: what failed)
    template_version varchar not null,
    cache_hit boolean not null,          -- the secondary's answer came from judge_cache (keyed by its model)
    judged_at timestamptz not null
);

create table if not exists hand_labels (
    label_id varchar not null,
    claim varchar not null,
    passage varchar not null,
    label varchar not null,              -- yes | partial | no
    labeller varchar not null,
    source_file varchar not null,
    source_line bigint not null,
    claim_normalized varchar not null,
    passage_normalized varchar not null,
    ingested_at timestamptz not null,
    -- schema 16: own labels (`citegate label`, the review page's Label tab; lib/calibration/label_log.py). Null on the others.
    origin varchar,                      -- own (sampled from this warehouse's traffic) | reference (any other)
    pair_key varchar,                    -- sha256 of the normalized passage's and claim's sha256
    citation_id varchar,                 -- the citation the pair was drawn from
    sample_seed bigint,                  -- the sample's seed
    stratum_surface varchar,             -- its stratum when drawn: surface x support verdict
    stratum_verdict varchar,
    labelled_at timestamptz
);

-- schema 16: two labellers on the same own pairs: how often they agree, and Cohen's kappa over yes / partial / no
create table if not exists label_agreement (
    first_labeller varchar not null,
    second_labeller varchar not null,
    pairs integer not null,              -- own pairs both labelled yes, partial or no
    agreed integer not null,
    kappa double,                        -- null: undefined (both gave one and the same label to every pair)
    computed_at timestamptz not null
);

create table if not exists label_rejects (
    source_file varchar not null,
    line_no bigint not null,
    reason varchar not null,
    detail varchar,
    raw_line varchar,
    rejected_at timestamptz not null
);

create table if not exists judge_calibration (
    judge_model varchar not null,
    template_version varchar not null,
    scope varchar not null,              -- no_or_partial | no: which human labels count as negatives
    labels integer not null,             -- hand labels judged
    negatives integer not null,          -- human labels in scope
    false_passes integer not null,       -- judge said yes on them
    false_pass_rate double,
    wilson_low double,                   -- 95% Wilson interval of the false pass rate
    wilson_high double,
    judge_errors integer not null,       -- labels the judge could not answer (not counted as negatives judged)
    threshold double not null,
    min_negatives integer not null,
    calibrated boolean not null,         -- wilson_high < threshold and negatives >= min_negatives
    computed_at timestamptz not null,
    -- the false fail rate (schema 5; the same on both scope rows, it does not depend on the scope of negatives)
    positives integer,                   -- human yes labels the judge answered (error excluded)
    false_fails integer,                 -- judge not yes on them (partial, no, unparseable)
    false_fail_rate double,
    false_fail_low double,               -- 95% Wilson interval of the false fail rate
    false_fail_high double,
    false_fail_threshold double,
    min_positives integer,
    too_strict boolean,                  -- false_fail_rate > false_fail_threshold; null when positives < min_positives
    -- schema 16: which labels the rates rest on. reference: shipped or external sets, unweighted, over all surfaces;
    -- own: this warehouse's sampled labels, weighted back to the traffic's mix, per surface and pooled (surface null)
    label_origin varchar,                -- own | reference (null: calibrated before schema 16, reference)
    surface varchar,                     -- own: the surface; null: every surface (pooled)
    effective_negatives double,          -- the weighted rate's effective sample size (Kish); = negatives unweighted
    effective_positives double,
    -- schema 17: each tier of the judge (null on rows written before: the judge alone)
    tier varchar,                        -- screen | llm | cascade (the cascade's rows share its judge_model)
    decided integer,                     -- labels the tier decided (not undecided, unjudged or error)
    coverage double,                     -- decided / labels it answered (error excluded); own rows: weighted
    said_no_on_yes integer               -- human-yes labels it said no to (the screen's false fails are only these)
);

create table if not exists judge_calibration_confusion (
    judge_model varchar not null,
    template_version varchar not null,
    human_label varchar not null,
    judge_verdict varchar not null,
    n integer not null,
    label_origin varchar,                -- schema 16: own | reference (labels counted, not weighted)
    tier varchar                         -- schema 17: as judge_calibration.tier
);

create table if not exists support_gate_status (
    surface varchar not null,
    stakes varchar not null,
    judge_model varchar not null,
    template_version varchar not null,
    status varchar not null,             -- enforced (own labels only) | uncalibrated | uncalibrated (reference labels
                                         -- only) | off
    why varchar not null,                -- both errors in words: the false pass bound and what the gate costs
    false_pass_upper double,
    negatives integer,
    computed_at timestamptz not null,
    -- what the gate costs in true citations failed (schema 5; null when stakes = off)
    positives integer,
    false_fails integer,
    false_fail_rate double,
    false_fail_low double,
    false_fail_high double,
    too_strict boolean,                  -- false_fail_rate > [calibration].false_fail_threshold; null: unknown or off
    judged_per_week double,              -- judged citations (verdict <> error) a week over the last 28 days judged
    extra_queue_per_week double,         -- judged_per_week * false_fail_rate: true citations queued a week
    judged_yes_rate double,              -- share of those judged citations the judge called yes (same window)
    -- schema 16: which labels the status rests on, and what to do next
    labels varchar,                      -- own | reference | none (null when stakes = off)
    pooled boolean,                      -- own labels pooled over surfaces (this surface has too few of its own)
    own_labels integer,                  -- this surface's own labels judged
    own_negatives integer,               -- ... of them human no or partial
    next_step varchar,                   -- label N more pairs, connect a judge; null: nothing to do
    judge_offline boolean                -- the judge ran without an endpoint
);

create table if not exists best_evidence (
    citation_id varchar not null,        -- every citation that fails support (verdict or numeric check)
    request_id varchar not null,
    day date not null,
    surface varchar not null,
    cited_verdict varchar,               -- the judge on the cited passage (null: not judged)
    cited_numeric_ok boolean not null,
    assessed boolean not null,           -- false when the surface's stakes are off (no judge by policy)
    cause varchar,                       -- generation | ranking_or_chunking | no_evidence | unknown (a passage no
                                         -- judge could decide leaves it open); null: not assessed
    better_chunk_id varchar,             -- the other passage that supports the claim, if any
    better_verdict varchar,
    candidates struct(chunk_id varchar, coverage double, verdict varchar, numeric_ok boolean)[],
    computed_at timestamptz not null
);

create table if not exists review_outcomes (
    review_id varchar not null,
    citation_id varchar not null,
    outcome varchar not null,            -- accept | repair | escalate
    cause varchar,                       -- escalate: chunking | truncation | ranking | other
    note varchar,
    reviewer varchar not null,
    reviewed_at timestamptz not null,
    queue_reason varchar not null,       -- the entry's reason when it was reviewed
    claim varchar,                       -- null: its request was forgotten (schema 10)
    passage varchar,
    source_file varchar not null,
    source_line bigint not null,
    is_latest boolean not null           -- the decision in force for its citation; earlier ones are kept
);

create table if not exists review_rejects (
    source_file varchar not null,
    line_no bigint not null,
    error varchar not null,
    raw_line varchar,
    recorded_at timestamptz not null
);

create table if not exists citation_queue (
    citation_id varchar not null,        -- one row per citation that fails either gate
    request_id varchar not null,
    day date not null,
    surface varchar not null,
    reason varchar not null,             -- a provenance failure, support_partial, support_no, judge_unparseable,
                                         -- numeric_mismatch, support_unjudged
    gate varchar not null,               -- provenance | support
    owner varchar not null,
    claim varchar,                       -- claim and span: null once dropped (schema 10)
    chunk_id varchar not null,
    span varchar,
    passage varchar,                     -- the cited chunk's text as it reached the prompt (or as retrieved, if it never did)
    passage_source varchar,              -- prompt | retrieved | none
    provenance_verdict varchar not null,
    provenance_reason varchar not null,
    chunk_share_in_prompt double,
    support_verdict varchar,             -- null when not judged
    judge_raw_answer varchar,
    judge_model varchar,
    numeric_ok boolean,                  -- null when provenance failed (not checked)
    missing_quantities varchar[],
    best_evidence_cause varchar,
    better_chunk_id varchar,
    prompt_sha256 varchar not null,      -- the pointer to the logged prompt:
    source_file varchar not null,        --   file and line of the log record
    source_line bigint not null,
    found_start integer,                 --   where the span was found in prompt_normalized
    found_end integer,
    section_start integer,               --   the cited section's body, when it is in the prompt
    section_end integer,
    context_start integer,
    context_end integer,
    status varchar not null,             -- open | accepted | repaired | escalated
    escalation_cause varchar,
    reviewed_by varchar,
    reviewed_at timestamptz,
    queued_at timestamptz not null,
    -- schema 18: a citation without a span shows its anchor (null once dropped, like the claim)
    origin varchar,                      -- structured | marker | native
    cited_as varchar,
    span_given boolean,
    anchor varchar,                      -- the anchor sentence, as retrieved (normalized)
    anchor_start integer,                -- where it stands in the chunk's retrieved text (normalized)
    anchor_end integer
);

create table if not exists metric_definitions (
    name varchar not null,
    version integer not null,
    kind varchar not null,               -- rate | breakdown | count
    description varchar not null,
    numerator varchar not null,          -- in words
    denominator varchar not null,        -- in words
    sha256 varchar not null,             -- of the definition file's text
    locked_sha256 varchar,               -- what metrics.lock.json pins for (name, version)
    in_lock boolean not null,            -- sha256 = locked_sha256
    sql_text varchar not null,
    recorded_at timestamptz not null
);

create table if not exists metric_lineage (
    metric varchar not null,
    definition_version integer not null,
    week_start date not null,            -- ISO week, Monday, UTC
    surface varchar not null,
    breakdown varchar,                   -- null for the headline rates
    citation_id varchar not null,        -- a citation in the denominator
    request_id varchar not null,         -- the prompt behind it
    numerator_weight double              -- its share of the numerator (0 or 1; a fraction for estimated end-to-end passes)
);

create table if not exists weekly_surface_metrics (
    week_start date not null,            -- the Monday of the ISO week (UTC)
    surface varchar not null,
    metric varchar not null,             -- provenance_pass_rate | support_pass_rate | end_to_end_pass_rate | queue_repair_rate
    definition_version integer not null,
    numerator double,                    -- null when part of it cannot be known (see the definition)
    denominator bigint not null,
    value double,                        -- numerator / denominator; null when the denominator is 0
    computed_at timestamptz not null
);

create table if not exists weekly_breakdowns (
    week_start date not null,
    surface varchar not null,
    metric varchar not null,             -- support_rate_by_chunking | support_rate_by_rank | queue_volume_by_reason | judge_errors
    breakdown varchar not null,          -- chunking strategy, rank, queue reason, judge model
    definition_version integer not null,
    numerator double,
    denominator bigint,                  -- null for a count
    value double,
    computed_at timestamptz not null
);

create table if not exists prompt_count_history (
    checked_at timestamptz not null,
    prompts bigint not null              -- stored prompts after each ingest: the log never shrinks
);

-- added in schema version 8 (sql/migrations/008_metric_week_inputs.sql): weekly metrics recompute only the
-- weeks whose inputs changed (lib/metrics/preregistered.py)
create table if not exists metric_week_inputs (
    week_start date not null,            -- ISO week, Monday, UTC
    fingerprint varchar not null,        -- md5 over the week's input row counts, stamps and review decisions
    definitions_sha256 varchar not null, -- of the definitions in force (name, version, sha256)
    computed_at timestamptz not null     -- when this week's metrics were computed
);

-- added in schema version 10 (sql/migrations/010_text_retention.sql): retention and `citegate forget`
-- (docs/retention.md). Neither table holds any text of a prompt, a chunk or an answer.
create table if not exists text_retention (
    day date not null,                   -- a day partition whose text was dropped ([retention] text_days)
    table_name varchar not null,
    rows_dropped bigint not null,        -- rows of that table whose text columns were set to null
    text_days integer not null,          -- the setting in force
    dropped_at timestamptz not null
);

create table if not exists forgotten_requests (
    request_id varchar not null,
    forgotten_at timestamptz not null,
    forgotten_by varchar not null,       -- --by, else $USER
    reason varchar,                      -- --reason, as given
    rows_touched varchar not null        -- JSON {table: rows} whose text was dropped or which were deleted
);

-- added in schema version 14 (sql/migrations/014_no_text_left.sql): a removal of text (retention, forget) marks the
-- working file, whose freed blocks still hold the text, for a rewrite (lib/storage/file_rewrite.py); the rewrite empties it
create table if not exists pending_file_rewrite (
    why varchar not null,                -- what removed text: retention, forget, ...
    marked_at timestamptz not null
);
