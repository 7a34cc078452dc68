-- Store new judge answers (never an `error`); a key already present is left as it was.
insert into judge_cache by name
select n.* from new_cache_rows n
where n.verdict <> 'error'
  and not exists (select 1 from judge_cache c where c.cache_key = n.cache_key)
