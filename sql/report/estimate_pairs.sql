-- `citegate estimate`: what support_verdicts would judge under the configured policy, without judging. Reads the
-- registered relation estimate_passages (lib/provenance/passages.py cited_passages: the provenance-passing citations of the
-- range with their claim and cited passage, from one streamed read of the prompts) and surface_policies (each
-- surface's policy); `selected` applies it exactly as support/support_sample does (same salt, same 52-bit key).
-- For each citation, the sha256 of the normalized passage and claim (the judge cache key's parts) and their
-- lengths in characters; null where retention removed the text.
select
    p.citation_id, p.surface, sp.stakes, sp.sample_rate,
    case sp.stakes
        when 'high' then true
        when 'low' then ('0x' || left(sha256($salt || p.citation_id), 13))::ubigint / 4503599627370496.0
                        < sp.sample_rate
        else false
    end as selected,
    sha256(p.passage) as passage_sha256,
    sha256(p.claim) as claim_sha256,
    length(p.passage) as passage_chars,
    length(p.claim) as claim_chars
from estimate_passages p
join surface_policies sp on sp.surface = p.surface
order by p.citation_id
