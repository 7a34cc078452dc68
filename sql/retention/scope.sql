-- What retention (by day) or forget (by request) drops text from: each update reads these two temp tables,
-- one of them empty. Filled by lib/retention/drop_text.py::drop_text.
create or replace temp table scope_days (day date not null);
create or replace temp table scope_requests (request_id varchar not null);
