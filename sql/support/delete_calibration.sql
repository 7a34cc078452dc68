delete from judge_calibration where judge_model = $judge_model and template_version = $template_version;
delete from judge_calibration_confusion where judge_model = $judge_model and template_version = $template_version;
