-- Rows: the human label; columns: the judge's verdict.
pivot (select judge_model, human_label, judge_verdict, n from judge_calibration_confusion)
on judge_verdict in ('yes', 'partial', 'no', 'unparseable', 'error')
using coalesce(sum(n), 0)
group by judge_model, human_label
order by judge_model, human_label desc
