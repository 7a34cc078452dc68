-- The earliest day in [$floor, $yesterday) with a verdict still waiting on an open batch ("batch pending: ..."
-- error rows, never cached): the nightly schedule runs from that day so the next run collects it.
select min(day) from support_verdicts
where verdict = 'error' and starts_with(raw_answer, $prefix) and day >= $floor and day < $yesterday
