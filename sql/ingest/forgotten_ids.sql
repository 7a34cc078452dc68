-- Which of the given request ids were forgotten (`citegate forget`): a rejected line of one keeps no text.
select distinct request_id from forgotten_requests where request_id in (select unnest($ids::varchar[]))
