-- `citegate estimate`: the chunk each citation of [$start, $end) cites, for review/other_passages (the other chunks of
-- a possible support failure's prompt, which best_evidence would judge).
select citation_id, chunk_id from citations where day >= $start and day < $end
