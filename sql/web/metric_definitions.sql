-- The metric definitions the published numbers were computed with (name, version, the words beside the numbers).
select name, version, kind, description, numerator, denominator from metric_definitions order by name, version
