-- `citegate estimate`: what support_verdicts would judge for [$start, $end) under the configured policy, without
-- judging. The citations are support/passages' (provenance ok, the cited section found); `selected` applies each
-- surface's policy from the registered relation surface_policies exactly as support/support_sample does (same
-- salt, same 52-bit key). For each, the sha256 of the normalized passage and claim (the cache key's parts) and
-- their lengths in characters. One bucket of requests at a time ($bucket of $buckets), as support/passages.
with pairs as (
    select
        r.citation_id, r.surface,
        sha256(c.claim_normalized) as claim_sha256,
        length(c.claim_normalized) as claim_chars,
        sha256(substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start)) as passage_sha256,
        length(substr(p.prompt_normalized, s.body_start + 1, s.body_end - s.body_start)) as passage_chars
    from provenance_results r
    join citations c on c.citation_id = r.citation_id
    join prompts p on p.request_id = r.request_id and p.day >= $start and p.day < $end
     and hash(p.request_id) % $buckets = $bucket
    join prompt_sections s
        on s.request_id = r.request_id and s.chunk_id = r.chunk_id and s.day >= $start and s.day < $end
       and r.found_start >= s.body_start and r.found_end <= s.body_end
    where r.day >= $start and r.day < $end and r.reason = 'ok' and c.day >= $start and c.day < $end
      and hash(r.request_id) % $buckets = $bucket
    qualify row_number() over (partition by r.citation_id order by s.section_no) = 1
),
keyed as (
    select pairs.*, sp.stakes, sp.sample_rate,
           ('0x' || left(sha256($salt || pairs.citation_id), 13))::ubigint / 4503599627370496.0 as sample_key
    from pairs
    join surface_policies sp on sp.surface = pairs.surface
)
select
    citation_id, surface, stakes, sample_rate,
    case stakes when 'high' then true when 'low' then sample_key < sample_rate else false end as selected,
    passage_sha256, claim_sha256, passage_chars, claim_chars
from keyed
