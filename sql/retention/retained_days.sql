-- Days whose text retention dropped: a run planned from the landing folder starts after them.
select distinct day from text_retention order by day
