-- High-stakes surfaces whose support gate is uncalibrated (high_stakes_judge_calibrated).
select surface, why from support_gate_status where stakes = 'high' and status = 'uncalibrated'
