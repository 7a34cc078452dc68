"""The provenance gate: each citation checked against the prompt that was really sent."""
