"""The review queue: best evidence, the reviewers' decisions log, the queue as text."""
