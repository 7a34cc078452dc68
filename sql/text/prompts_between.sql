-- prompts_between(first_day, end_day): the prompts of [first_day, end_day) as the `prompts` view gives them, for a
-- reader that streams their text (lib/storage/text_store.py streamed_text, which makes this a temporary macro and turns off
-- DuckDB's join reordering for the statement). Built as written, the right join holds prompt_rows in its hash table
-- and streams the text files past it; the view, planned freely, holds the text instead (DuckDB builds on the side it
-- estimates narrower). Both sides are bounded by the days inside: a filter above a right join is not pushed into it.
-- The glob and the prefix are replaced by the text folder's path, as in prompts_view.sql.
select r.* exclude (text_file) replace (
    coalesce(r.prompt_raw, t.prompt_raw) as prompt_raw,
    coalesce(r.prompt_normalized, t.prompt_normalized) as prompt_normalized
)
from (
    select * from read_parquet('$glob', filename = true, hive_partitioning = true, hive_types = {'day': date})
    where day >= first_day and day < end_day
) t
right join (select * from prompt_rows where day >= first_day and day < end_day) r
    on t.day = r.day and t.request_id = r.request_id and t.filename = '$prefix' || r.text_file
