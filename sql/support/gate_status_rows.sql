-- The support gate status as the one-line summary reads it (lib/reporting.py gate_summary).
select surface, status, labels, pooled, judge_model, judge_offline, next_step
from support_gate_status
order by surface
