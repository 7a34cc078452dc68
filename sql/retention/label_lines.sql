-- The own-labels log lines (the labels folder) whose standing label holds a pair of the request's citations: named
-- for the operator, as the reviews log's are (hand_labels is rebuilt from that folder at each calibration).
select distinct source_file, source_line
from hand_labels
where citation_id is not null and starts_with(citation_id, $request_id || '#')
  and regexp_full_match(substr(citation_id, length($request_id) + 2), '[0-9]+')
order by 1, 2
