-- The queue entries of one request, for a hint when a request id is typed where a citation id is wanted.
select citation_id from citation_queue where request_id = $request_id order by length(citation_id), citation_id
