-- How many citations one request has, for a hint when a request id is typed where a citation id is wanted.
select count(*) from citations where request_id = $request_id
