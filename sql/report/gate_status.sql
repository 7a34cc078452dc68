-- Is each surface's support gate enforced?
select surface, stakes, judge_model, status, why from support_gate_status order by surface
