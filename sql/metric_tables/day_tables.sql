-- The warehouse tables with a day column: while some weeks are recomputed, each is read through a temp view
-- holding only those weeks' days (lib/metrics/preregistered.py).
select table_name
from duckdb_columns()
where database_name = current_database() and schema_name = 'main' and column_name = 'day' and data_type = 'DATE'
order by table_name
