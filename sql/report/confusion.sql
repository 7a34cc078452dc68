-- Rows: the labels (own or reference) and the human label; columns: the judge's verdict (labels counted, not weighted).
pivot (select judge_model, coalesce(label_origin, 'reference') as labels, human_label, judge_verdict, n
       from judge_calibration_confusion)
on judge_verdict in ('yes', 'partial', 'no', 'unparseable', 'error')
using coalesce(sum(n), 0)
group by judge_model, labels, human_label
order by judge_model, labels desc, human_label desc
