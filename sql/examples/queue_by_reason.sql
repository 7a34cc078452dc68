-- The review queue by reason and owner: volume, what is still open, what reviewers decided.
select reason, owner, count(*) as entries,
       count(*) filter (where status = 'open') as open,
       count(*) filter (where status = 'repaired') as repaired,
       count(*) filter (where status = 'accepted') as accepted,
       count(*) filter (where status = 'escalated') as escalated
from citation_queue
group by reason, owner
order by entries desc
