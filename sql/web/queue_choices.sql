-- The values each queue filter can take (the filter menus): surfaces, reasons, owners and ISO weeks (Mondays).
select 'surface' as filter, surface as value from citation_queue group by surface
union all
select 'reason', reason from citation_queue group by reason
union all
select 'owner', owner from citation_queue group by owner
union all
select 'week', strftime(date_trunc('week', day), '%Y-%m-%d') from citation_queue group by 2
order by filter, value
