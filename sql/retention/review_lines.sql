-- The reviews log lines holding a snapshot of the request's claims and passages (review_outcomes is rebuilt
-- from that log each night, so it is named for the operator instead of being changed here).
select distinct o.source_file, o.source_line
from review_outcomes o
join citations c on c.citation_id = o.citation_id
where c.request_id = $request_id
order by 1, 2
