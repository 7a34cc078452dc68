-- Which provenance-passing citations of [$start, $end) are judged, and why (each surface's policy from the
-- registered relation surface_policies, which lib/support/policies.py resolves for every surface of the days).
insert into support_sample
with passing as (
    select citation_id, request_id, day, surface
    from provenance_results
    where day >= $start and day < $end and reason = 'ok'
),
policy as (
    select p.*, s.stakes, s.sample_rate
    from passing p
    join surface_policies s on s.surface = p.surface
),
keyed as (
    -- 52 bits of sha256: uniform in [0, 1), stable across runs, machines and DuckDB versions
    select *, ('0x' || left(sha256($salt || citation_id), 13))::ubigint / 4503599627370496.0 as sample_key
    from policy
)
select
    citation_id, request_id, day, surface, stakes, sample_rate, sample_key,
    case stakes when 'high' then true when 'low' then sample_key < sample_rate else false end as selected,
    case stakes
        when 'high' then 'high_stakes'
        when 'off' then 'stakes_off'
        else case when sample_key < sample_rate then 'sampled' else 'not_sampled' end
    end as why
from keyed
