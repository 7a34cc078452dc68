-- Every surface that has citations, for the gate status of surfaces citegate.toml does not list.
select distinct surface from citations order by 1
