-- The secondary judge's answer as returned; both verdicts stay. A citation id is its request id, '#', its position.
update judge_agreement set secondary_raw_answer = null
where day between $first and $last
  and (day in (select day from scope_days)
       or exists (select 1 from scope_requests s where starts_with(citation_id, s.request_id || '#')
                  and regexp_full_match(substr(citation_id, length(s.request_id) + 2), '[0-9]+')))
  and secondary_raw_answer is not null
