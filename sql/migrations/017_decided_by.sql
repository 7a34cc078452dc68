-- Schema 16 -> 17: the judge cascade. Each support verdict records which tier decided it (screen | llm; null for
-- unjudged and error), and calibration reports each tier's error rates. Rows written before keep nulls: a verdict
-- of an earlier run was the one configured judge's, a calibration row the judge alone.
alter table support_verdicts add column if not exists decided_by varchar;
alter table judge_calibration add column if not exists tier varchar;
alter table judge_calibration add column if not exists decided integer;
alter table judge_calibration add column if not exists coverage double;
alter table judge_calibration add column if not exists said_no_on_yes integer;
alter table judge_calibration_confusion add column if not exists tier varchar;
