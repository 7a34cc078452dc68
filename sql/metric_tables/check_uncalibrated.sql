-- High-stakes surfaces whose support gate is not enforced on own labels (high_stakes_judge_calibrated): uncalibrated,
-- or uncalibrated (reference labels only).
select surface, status, why from support_gate_status where stakes = 'high' and status like 'uncalibrated%'
