-- The rows of one text file that keep their text: out of retention's or forget's scope.
select request_id
from prompt_rows
where text_file = $file
  and not (day between $first and $last
           and (day in (select day from scope_days) or request_id in (select request_id from scope_requests)))
