"""The support gate: the sample, the judges (judge/), the cache, the cascade and the numeric check."""
