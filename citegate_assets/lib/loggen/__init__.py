"""Sample citegate-log/1 generator: a fictional B2B SaaS ("Northwind Cloud") answering from a KB.

Every citation is built so that one known provenance reason is TRUE for it, and that reason is
written to a ground-truth file next to the logs; malformed lines are planted the same way. The
checker can then be scored against the truth instead of eyeballed.

Pure stdlib and deterministic: all randomness comes from `random.Random` instances seeded from
(seed, purpose), never from time or the global RNG, and records are serialized with a fixed key
order, so the same arguments give byte-identical files (gzip members carry mtime 0 and no name).

Modules, each importing only those before it: vocabulary (reasons, surfaces, template headers),
sentences and slots (the text bank and its filling), corpus, retrieval (what made it into a prompt),
citations (citations and claims), rendering (the logged prompt), request (one record), malformed
(bad lines), demo_labels (hand labels drawn from the truth, for the demo's calibration), generator (files,
truth, labels, summary).
"""

from citegate_assets.lib.loggen.generator import LOG_FORMAT, generate_logs
from citegate_assets.lib.loggen.malformed import MALFORMED_KINDS, PROMPT_KEPT_KINDS
from citegate_assets.lib.loggen.vocabulary import CLAIM_KINDS, REASONS, SURFACES, Surface

__all__ = [
    "CLAIM_KINDS",
    "LOG_FORMAT",
    "MALFORMED_KINDS",
    "PROMPT_KEPT_KINDS",
    "REASONS",
    "SURFACES",
    "Surface",
    "generate_logs",
]
