"""The ingest stage: landing files and trace formats read, validated, normalized and appended."""
