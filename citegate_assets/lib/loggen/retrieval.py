"""What made it into one prompt: the retrieved chunks, those rendered in rank order, those the token budget
dropped whole, and the one rendered chunk whose body it cut."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from random import Random

from citegate_assets.lib.loggen.corpus import Chunk, Corpus
from citegate_assets.lib.loggen.vocabulary import Surface, fold


@dataclass
class Layout:
    retrieved: list[Chunk]
    rendered: list[Chunk]  # the first m retrieved, in rank order
    dropped: list[Chunk]  # the lowest-ranked, cut whole by the token budget
    trunc: Chunk | None = None  # the one rendered chunk whose body was cut
    trunc_cut: int = 0  # its body is text[:trunc_cut]
    bodies: list[str] = field(default_factory=list)  # rendered body per rendered chunk
    norms: list[str] = field(default_factory=list)  # fold(body)

    @property
    def full(self) -> list[Chunk]:
        return [c for c in self.rendered if c is not self.trunc]

    def where(self, folded: str) -> list[int]:
        """Indexes of rendered bodies containing the folded span."""
        return [i for i, n in enumerate(self.norms) if folded in n]


def _retrieve(rng: Random, corpus: Corpus, topic: str, surface: Surface, k: int) -> list[Chunk]:
    picked: list[Chunk] = []
    ids: set[str] = set()
    while len(picked) < k:
        pool = corpus.by_topic[topic if rng.random() < 0.7 else rng.choice(surface.topics)]
        chunk = rng.choice(pool)
        if chunk.chunk_id not in ids:
            ids.add(chunk.chunk_id)
            picked.append(chunk)
    return picked


def _cut_point(rng: Random, chunk: Chunk) -> int | None:
    """A word boundary at 20-70% of the text with at least one whole sentence after it."""
    text = chunk.text
    hi = min(0.7 * len(text), chunk.starts[-1] - 1)
    spaces = [m.start() for m in re.finditer(r"\s", text) if 0.2 * len(text) <= m.start() <= hi]
    return rng.choice(spaces) if spaces else None


def plan_layout(rng: Random, corpus: Corpus, surface: Surface, topic: str, reasons: list[str]) -> Layout:
    truncate = "span_truncated" in reasons or rng.random() < 0.04  # sometimes the budget cuts an uncited chunk
    if "dropped_before_prompt" in reasons:
        n_drop = rng.choice((1, 1, 2))
    else:
        n_drop = 1 if rng.random() < 0.12 else 0
    need_full = 2 if "span_in_other_chunk" in reasons else 1
    k = max(rng.randint(3, 8), need_full + int(truncate) + n_drop)
    retrieved = _retrieve(rng, corpus, topic, surface, k)
    m = k - n_drop
    layout = Layout(retrieved, retrieved[:m], retrieved[m:])
    if truncate:
        # LlamaIndex sources are delimited by the next "Source N:", so only the last may be cut.
        index = m - 1 if surface.template == "llamaindex-citation" else rng.randrange(m)
        cut = _cut_point(rng, layout.rendered[index])
        if cut is not None:
            layout.trunc, layout.trunc_cut = layout.rendered[index], cut
    for chunk in layout.rendered:
        body = chunk.text[: layout.trunc_cut].rstrip() if chunk is layout.trunc else chunk.text
        layout.bodies.append(body)
        layout.norms.append(chunk.norm if chunk is not layout.trunc else fold(body))
    return layout
