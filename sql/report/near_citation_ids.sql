-- Queue ids that contain the typed id with its blanks stripped: candidates for a did-you-mean hint.
select citation_id from citation_queue where contains(citation_id, $core) order by citation_id limit 200
