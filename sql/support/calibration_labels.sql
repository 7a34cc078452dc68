-- The hand labels the judge is calibrated on, with the labels they are (own: sampled from this warehouse's traffic;
-- reference: any other, and every label of a warehouse calibrated before schema 14).
select label_id, label, passage_normalized, claim_normalized, coalesce(origin, 'reference') as origin, pair_key,
       citation_id
from hand_labels
