-- The queue entry's copies of the claim, span, anchor, passage and the judge's text; reasons, verdicts, offsets stay.
update citation_queue set claim = null, span = null, anchor = null, passage = null, judge_raw_answer = null
where day between $first and $last  -- a constant range: only those days' row groups are read
  and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
  and (claim is not null or span is not null or anchor is not null or passage is not null or judge_raw_answer is not null)
