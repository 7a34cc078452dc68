-- The primary judge's verdicts of [$start, $end) that the secondary judge ([judge.secondary]) also sees: a stable
-- hash sample of the pairs the primary judged (yes, partial or no), at $rate. The salt differs from the support
-- sample's, so a low-stakes surface's sample is not simply taken again (lib/support/agreement.py agreement_key is the same
-- function in Python).
select citation_id, day, surface, judge_model as primary_model, verdict as primary_verdict
from support_verdicts
where day >= $start and day < $end
  and verdict in ('yes', 'partial', 'no')
  and ('0x' || left(sha256($salt || citation_id), 13))::ubigint / 4503599627370496.0 < $rate
order by citation_id
