-- The reviews log is the source of truth and only ever appended to: the tables are rebuilt from it whole.
delete from review_outcomes;
delete from review_rejects;
