-- Each surface's support gate with both errors: enforced or not (the false pass bound, on own labels only), which
-- labels that rests on (own, pooled over surfaces or not; reference), what it costs (the false fail rate with its 95%
-- interval, too_strict, the true citations it queues a week), and the next step.
select surface, stakes, status,
       case when labels = 'own' and pooled then 'own (pooled)' else labels end as labels,
       case when too_strict then 'yes' when not too_strict then 'no' when status = 'off' then '' else 'unknown' end
           as too_strict,
       round(false_pass_upper, 4) as false_pass_upper,
       case when false_fail_rate is not null
            then printf('%.3f [%.3f, %.3f]', false_fail_rate, false_fail_low, false_fail_high) end
           as false_fail_rate_ci95,
       round(judged_per_week, 1) as judged_per_week,
       round(judged_yes_rate, 3) as judged_yes_rate,
       round(extra_queue_per_week, 1) as extra_queue_per_week,
       judge_model, template_version, why, next_step
from support_gate_status
order by surface
