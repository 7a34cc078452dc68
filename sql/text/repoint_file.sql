-- The rows that keep their text now read it from the rewritten file.
update prompt_rows set text_file = $new
where text_file = $old
  and not (day between $first and $last
           and (day in (select day from scope_days) or request_id in (select request_id from scope_requests)))
