-- Rows: the judge, its tier, the labels (own or reference) and the human label; columns: the judge's verdict (labels
-- counted, not weighted).
pivot (select judge_model, coalesce(tier, '') as tier, coalesce(label_origin, 'reference') as labels, human_label,
              judge_verdict, n
       from judge_calibration_confusion)
on judge_verdict in ('yes', 'partial', 'no', 'unparseable', 'undecided', 'unjudged', 'error')
using coalesce(sum(n), 0)
group by judge_model, tier, labels, human_label
order by judge_model, case tier when 'screen' then 1 when 'llm' then 2 when 'cascade' then 3 else 0 end, labels desc,
         human_label desc
