-- The text files naming a prompt row that retention or forget drops the text of (sql/retention/scope.sql).
select distinct text_file
from prompt_rows
where day between $first and $last
  and (day in (select day from scope_days) or request_id in (select request_id from scope_requests))
  and text_file is not null
order by 1
