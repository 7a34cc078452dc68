-- The surfaces the published copy holds prompts of: what `citegate queue --surface` may name.
select distinct surface from prompts order by surface
