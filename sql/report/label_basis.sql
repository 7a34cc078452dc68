-- The hand labels the judge's calibration rests on, per origin (own, reference), file and labeller (`citegate demo`'s
-- judge report).
select coalesce(origin, 'reference') as origin, source_file, labeller, count(*) as labels,
       count(*) filter (where label = 'yes') as yes,
       count(*) filter (where label = 'partial') as partial,
       count(*) filter (where label = 'no') as no
from hand_labels
group by all
order by origin, source_file, labeller
