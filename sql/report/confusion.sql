-- Rows: the human label; columns: the judge's verdict (per judge model and tier).
pivot (select judge_model, coalesce(tier, '') as tier, human_label, judge_verdict, n from judge_calibration_confusion)
on judge_verdict in ('yes', 'partial', 'no', 'unparseable', 'undecided', 'unjudged', 'error')
using coalesce(sum(n), 0)
group by judge_model, tier, human_label
order by judge_model, tier, human_label desc
