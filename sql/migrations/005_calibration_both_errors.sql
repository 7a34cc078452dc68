-- Schema 4 -> 5: calibration reports the false fail rate beside the false pass rate.
-- Rows calibrated before schema 5 keep nulls in these columns until the next calibration of their judge.
alter table judge_calibration add column if not exists positives integer;
alter table judge_calibration add column if not exists false_fails integer;
alter table judge_calibration add column if not exists false_fail_rate double;
alter table judge_calibration add column if not exists false_fail_low double;
alter table judge_calibration add column if not exists false_fail_high double;
alter table judge_calibration add column if not exists false_fail_threshold double;
alter table judge_calibration add column if not exists min_positives integer;
alter table judge_calibration add column if not exists too_strict boolean;
-- what each surface's support gate costs in true citations failed
alter table support_gate_status add column if not exists positives integer;
alter table support_gate_status add column if not exists false_fails integer;
alter table support_gate_status add column if not exists false_fail_rate double;
alter table support_gate_status add column if not exists false_fail_low double;
alter table support_gate_status add column if not exists false_fail_high double;
alter table support_gate_status add column if not exists too_strict boolean;
alter table support_gate_status add column if not exists judged_per_week double;
alter table support_gate_status add column if not exists extra_queue_per_week double;
alter table support_gate_status add column if not exists judged_yes_rate double;
