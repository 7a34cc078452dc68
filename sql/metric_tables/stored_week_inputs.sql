select week_start, fingerprint, definitions_sha256 from metric_week_inputs
