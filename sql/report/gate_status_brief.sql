-- Each surface's support gate status and the judge it was computed for (`citegate demo`'s judge report).
select surface, status, judge_model, negatives, positives from support_gate_status order by surface
