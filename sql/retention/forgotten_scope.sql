-- Every request forgotten so far: the nightly run drops again the text that re-reading the landing folder
-- (a refused duplicate line) or the reviews log brought back.
insert into scope_requests select distinct request_id from forgotten_requests
