-- The prompts as readers know them (schema 12): prompt_rows with the text of the Parquet file each row names;
-- rows written before schema 12 keep their text inline. A file's row is read only where a row names that file, so
-- a file no committed row names is never read. Joined on the day folder too, so a query bounded by constant days
-- opens only those days' files. The glob and the prefix are replaced by the text folder's path
-- (lib/storage/text_store.py: a view cannot bind parameters).
select r.* exclude (text_file) replace (
    coalesce(r.prompt_raw, t.prompt_raw) as prompt_raw,
    coalesce(r.prompt_normalized, t.prompt_normalized) as prompt_normalized
)
from prompt_rows r
left join read_parquet('$glob', filename = true, hive_partitioning = true, hive_types = {'day': date}) t
    on t.day = r.day and t.request_id = r.request_id and t.filename = '$prefix' || r.text_file
