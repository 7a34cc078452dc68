-- The calibration of one judge model under one judge prompt version: the rows of the tier whose verdicts are the
-- gate's ($tier: screen, llm or cascade), or of the judge alone when calibrated before tiers were recorded.
select * from judge_calibration
where judge_model = $judge_model and template_version = $template_version and coalesce(tier, $tier) = $tier
