-- `citegate estimate`: which of the wanted cache keys (registered relation wanted_keys) judge_cache already holds.
select distinct w.cache_key
from wanted_keys w
join judge_cache c on c.cache_key = w.cache_key
