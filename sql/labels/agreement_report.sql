-- Two labellers on the same own pairs (label_agreement, from the last calibration): agreement and Cohen's kappa.
select first_labeller, second_labeller, pairs, agreed, kappa from label_agreement order by 1, 2
