-- The labels folder is the source of truth for hand labels: replace them whole.
delete from hand_labels;
delete from label_rejects;
insert into hand_labels by name select * from new_labels;
insert into label_rejects by name select * from new_label_rejects;
