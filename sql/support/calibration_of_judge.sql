-- The calibration of one judge model under one judge prompt version.
select * from judge_calibration where judge_model = $judge_model and template_version = $template_version
