-- Schema 7 -> 8: weekly metrics recompute only the weeks whose inputs changed (lib/metrics/preregistered.py).
-- One row per week the metrics were last computed for: a fingerprint of what they were computed from.
create table if not exists metric_week_inputs (
    week_start date not null,            -- ISO week, Monday, UTC
    fingerprint varchar not null,        -- md5 over the week's input row counts, stamps and review decisions
    definitions_sha256 varchar not null, -- of the definitions in force (name, version, sha256)
    computed_at timestamptz not null     -- when this week's metrics were computed
);
