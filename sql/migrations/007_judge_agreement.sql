-- Schema 6 -> 7: [judge.secondary], a candidate judge run on a sample of the primary's judged pairs.
-- One row per sampled pair with both verdicts; read only for agreement (Cohen's kappa, the confusion table).
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
