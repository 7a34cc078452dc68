-- Both error rates of every judge model, template version and tier on the hand labels (`citegate calibrate`, the run
-- summary): the false pass rate per scope of negatives (human no or partial; human no) and the false fail rate
-- on the human yes labels, each with its counts and 95% Wilson interval (unrounded: the report rounds). judged
-- excludes the judge's errors. tier: screen, llm or cascade (empty for rows calibrated before tiers were recorded);
-- coverage: the share of the labels the tier decided. labels: reference (unweighted), or own (weighted to the
-- traffic's mix; effective_n is the Kish effective sample size the interval rests on) per surface or pooled
-- (surface '(all)').
select judge_model, template_version, tier, labels, surface, error, human, judged, effective_n, errors_made, rate,
       ci95_low, ci95_high, threshold, min_judged, verdict, judge_errors, coverage
from (
    select judge_model, template_version, coalesce(tier, '') as tier, coalesce(label_origin, 'reference') as labels,
           coalesce(surface, '(all)') as surface, 'false pass' as error,
           case scope when 'no_or_partial' then 'no or partial' else scope end as human,
           negatives as judged, coalesce(effective_negatives, negatives) as effective_n, false_passes as errors_made,
           false_pass_rate as rate,
           wilson_low as ci95_low, wilson_high as ci95_high, threshold,
           min_negatives as min_judged,
           case when not calibrated then 'uncalibrated'
                when label_origin = 'own' then 'calibrated'
                else 'under the threshold (reference labels: not enforced)' end as verdict,
           judge_errors, coverage, case scope when 'no_or_partial' then 1 else 2 end as ord
    from judge_calibration
    union all
    select judge_model, template_version, coalesce(tier, ''), coalesce(label_origin, 'reference'),
           coalesce(surface, '(all)'), 'false fail', 'yes',
           positives, coalesce(effective_positives, positives), false_fails, false_fail_rate, false_fail_low,
           false_fail_high,
           false_fail_threshold, min_positives,
           case when positives is null then 'not measured: recalibrate'
                when too_strict then 'too strict' when not too_strict then 'ok'
                else 'unknown: too few labels' end,
           judge_errors, coverage, 3
    from judge_calibration where scope = 'no_or_partial'
)
order by judge_model, template_version,
         case tier when 'screen' then 1 when 'llm' then 2 when 'cascade' then 3 else 0 end, labels desc, surface, ord
