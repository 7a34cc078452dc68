-- The hand labels the judge is calibrated on.
select label_id, label, passage_normalized, claim_normalized from hand_labels
