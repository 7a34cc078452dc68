-- One metric cell: its numbers and its definition.
select m.metric, m.definition_version, m.week_start, m.surface, m.numerator, m.denominator, m.value,
       d.description, d.numerator as numerator_words, d.denominator as denominator_words
from (
    select metric, definition_version, week_start, surface, null as breakdown, numerator, denominator, value from weekly_surface_metrics
    union all
    select metric, definition_version, week_start, surface, breakdown, numerator, denominator, value from weekly_breakdowns
) m
join metric_definitions d on d.name = m.metric and d.version = m.definition_version
where m.metric = $metric and m.surface = $surface and m.week_start = $week
  and (($breakdown is null and m.breakdown is null) or m.breakdown = $breakdown)
