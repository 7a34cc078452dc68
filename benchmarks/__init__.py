"""`make bench`: speed and memory figures of citegate against their targets (never part of `make test`)."""
