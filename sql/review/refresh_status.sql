-- After new review outcomes: every queue entry's status follows its latest decision, whatever its day.
update citation_queue q set
    status = case l.outcome when 'accept' then 'accepted' when 'repair' then 'repaired' when 'escalate' then 'escalated' end,
    escalation_cause = case when l.outcome = 'escalate' then l.cause end,
    reviewed_by = l.reviewer,
    reviewed_at = l.reviewed_at
from review_outcomes l
where l.citation_id = q.citation_id and l.is_latest
