-- The labels folder is the source of truth for hand labels: replace them whole (and the labellers' agreement on them).
delete from hand_labels;
delete from label_rejects;
delete from label_agreement;
insert into hand_labels by name select * from new_labels;
insert into label_rejects by name select * from new_label_rejects;
insert into label_agreement by name select * from new_label_agreement;
