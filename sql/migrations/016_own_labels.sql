-- Schema 15 -> 16: labels from the warehouse's own traffic. hand_labels says which labels are own (sampled from this
-- warehouse) and where each was drawn; judge_calibration and support_gate_status say which labels their rates rest
-- on (a gate is enforced on own labels only). Rows written before keep nulls: hand_labels is rebuilt whole at the
-- next calibration, and null label_origin reads as reference.
alter table hand_labels add column if not exists origin varchar;
alter table hand_labels add column if not exists pair_key varchar;
alter table hand_labels add column if not exists citation_id varchar;
alter table hand_labels add column if not exists sample_seed bigint;
alter table hand_labels add column if not exists stratum_surface varchar;
alter table hand_labels add column if not exists stratum_verdict varchar;
alter table hand_labels add column if not exists labelled_at timestamptz;
alter table judge_calibration add column if not exists label_origin varchar;
alter table judge_calibration add column if not exists surface varchar;
alter table judge_calibration add column if not exists effective_negatives double;
alter table judge_calibration add column if not exists effective_positives double;
alter table judge_calibration_confusion add column if not exists label_origin varchar;
alter table support_gate_status add column if not exists labels varchar;
alter table support_gate_status add column if not exists pooled boolean;
alter table support_gate_status add column if not exists own_labels integer;
alter table support_gate_status add column if not exists own_negatives integer;
alter table support_gate_status add column if not exists next_step varchar;
alter table support_gate_status add column if not exists judge_offline boolean;
