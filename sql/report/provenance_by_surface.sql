-- Provenance reasons per surface, pivoted: one row per surface, a column per reason; days in [$start, $end).
pivot (select surface, reason from provenance_results where day >= $start and day < $end)
on reason in ('ok', 'fabricated_id', 'dropped_before_prompt', 'span_truncated', 'span_missing',
              'span_outside_context', 'span_in_other_chunk', 'context_not_found', 'location_mismatch')
using count(*)
group by surface
order by surface
