insert into text_retention (day, table_name, rows_dropped, text_days, dropped_at)
values ($day, $table_name, $rows_dropped, $text_days, $dropped_at)
