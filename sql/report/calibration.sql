-- The judge's false pass rate on hand labels, per judge model and template version.
select judge_model, template_version, scope, labels, negatives, false_passes,
       round(false_pass_rate, 4) as false_pass_rate, round(wilson_low, 4) as ci95_low, round(wilson_high, 4) as ci95_high,
       judge_errors, threshold, min_negatives, calibrated
from judge_calibration
order by judge_model, template_version, scope desc
