-- The ledger of landing files, read once per run (lib/ingest/ledger.py): one row per file identity or entry.
select * exclude (days), days from ingested_files
