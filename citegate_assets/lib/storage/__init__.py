"""Where the data lives: the DuckDB warehouse, prompt text files, the lake (Delta tables), the published copy."""
